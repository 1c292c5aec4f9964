//! Kernel addresses named as they were when captured: the frames of kernel stacks and the
//! SRCU domains, through the run's symbol keeper.

use std::collections::HashMap;

use anyhow::Result;
use rcutrace_common::attribution::DomainInit;

use crate::{
    kernel::symbols::{
        keeper::{Names, SymbolKeeper},
        unknown,
    },
    model::attribution::{domain_name, initialiser},
    trace::tracer::Tracer,
};

/// Symbolized frames of the kernel stacks the programs kept, by stack id, `name+offset`
/// deepest first, named as they were when captured; the symbols are asked for on first use,
/// once for all the stacks, so reports without stacks never pay for them.
///
/// A namer holds the keeper's symbols from its first use until it is dropped: another
/// namer of the same keeper used meanwhile waits for them forever. Use one at a time.
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
/// seen (kept by `symbols`); one no symbol names (a dynamic `srcu_struct`) by its address,
/// and by the code that initialised it if that was while tracing (`SRCU_DOMAIN_INIT`). Holds
/// the symbols as `stack_frames` does: one namer at a time.
pub fn domain_names<'a>(
    tracer: &'a Tracer,
    symbols: &'a SymbolKeeper,
) -> impl FnMut(u64) -> String + 'a {
    let mut names = None;
    let mut inits: Option<HashMap<u64, DomainInit>> = None;
    move |address| {
        let names = names.get_or_insert_with(|| symbols.names());
        let frame = names.frame(address);
        if frame != unknown(address) {
            return domain_name(&frame);
        }
        let inits = inits.get_or_insert_with(|| match tracer.hash_entries("DOMAIN_INITS") {
            Ok(entries) => entries.into_iter().collect(),
            Err(e) => {
                log::warn!("who initialised the SRCU domains is unknown: {e:#}");
                HashMap::new()
            }
        });
        let stack: Vec<String> = inits
            .get(&address)
            .into_iter()
            .flatten()
            .take_while(|&&a| a != 0)
            .map(|&a| names.frame(a))
            .collect();
        match initialiser(&stack) {
            Some(by) => format!("{frame} (initialised in {by})"),
            None => frame,
        }
    }
}

/// A kernel stack's addresses as frames, or why it could not be read.
pub fn symbolize(names: &Names<'_>, addresses: Result<Vec<u64>>) -> Vec<String> {
    match addresses {
        Ok(addresses) => addresses.iter().map(|&a| names.frame(a)).collect(),
        Err(e) => vec![format!("[stack unreadable: {e:#}]")],
    }
}
