//! Kernel addresses named as they were when captured: the frames of kernel stacks and the
//! SRCU domains, through the run's symbol keeper.

use anyhow::Result;

use crate::{
    kernel::symbols::keeper::{Names, SymbolKeeper},
    trace::tracer::Tracer,
};

/// Symbolized frames of the kernel stacks the programs kept, by stack id, `name+offset`
/// deepest first, named as they were when captured; the symbols are asked for on first use,
/// once for all the stacks, so reports without stacks never pay for them.
pub fn stack_frames<'a>(
    tracer: &'a Tracer,
    symbols: &'a SymbolKeeper,
) -> impl FnMut(u64) -> Vec<String> + 'a {
    let mut names = None;
    move |stack| {
        symbolize(
            names.get_or_insert_with(|| symbols.names()),
            tracer.stack(stack),
        )
    }
}

/// Names SRCU domains by the symbol at their address, as the kernel had it when they were
/// seen (kept by `symbols`), or by the address.
pub fn domain_names(symbols: &SymbolKeeper) -> impl FnMut(u64) -> String + '_ {
    let mut names = None;
    move |address| {
        let names = names.get_or_insert_with(|| symbols.names());
        crate::model::attribution::domain_name(&names.frame(address))
    }
}

/// A kernel stack's addresses as frames, or why it could not be read.
pub fn symbolize(names: &Names<'_>, addresses: Result<Vec<u64>>) -> Vec<String> {
    match addresses {
        Ok(addresses) => addresses.iter().map(|&a| names.frame(a)).collect(),
        Err(e) => vec![format!("[stack unreadable: {e:#}]")],
    }
}
