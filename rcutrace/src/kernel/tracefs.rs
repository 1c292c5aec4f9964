//! Tracepoints' records as tracefs describes them: where each field is, so that the programs
//! read them at the running kernel's offsets.

use anyhow::{Context as _, Result};

/// Where tracefs is mounted: its own mount, or under debugfs on older set-ups.
const ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The format description of tracepoint `category:event`, where tracefs has it.
pub fn format(category: &str, event: &str) -> Option<String> {
    ROOTS.iter().find_map(|root| {
        std::fs::read_to_string(format!("{root}/events/{category}/{event}/format")).ok()
    })
}

/// The offset of `field` in a tracepoint's format description, whose lines read
/// `field:const char * msg;\toffset:16;\tsize:8;\tsigned:0;`.
pub fn field_offset(format: &str, field: &str) -> Option<u32> {
    format.lines().find_map(|line| {
        let mut parts = line.trim().split(';');
        let declaration = parts.next()?.trim().strip_prefix("field:")?;
        let name = declaration.rsplit([' ', '*']).next()?;
        if name != field {
            return None;
        }
        parts
            .find_map(|p| p.trim().strip_prefix("offset:"))?
            .parse()
            .ok()
    })
}

/// The offsets of `fields` in tracepoint `category:event`, or why they cannot be had.
pub fn field_offsets<const N: usize>(
    category: &str,
    event: &str,
    fields: [&str; N],
) -> Result<[u32; N]> {
    let format = format(category, event).with_context(|| {
        format!(
            "tracepoint {category}:{event} has no format file in tracefs (is tracefs mounted \
             at {}?)",
            ROOTS[0]
        )
    })?;
    let mut offsets = [0; N];
    for (offset, field) in offsets.iter_mut().zip(fields) {
        *offset = field_offset(&format, field)
            .with_context(|| format!("tracepoint {category}:{event} has no field {field}"))?;
    }
    Ok(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets_from_the_format_file() {
        let format = "name: rcu_stall_warning\nID: 362\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:const char * rcuname;\toffset:8;\tsize:8;\tsigned:0;\n\
            \tfield:const char * msg;\toffset:16;\tsize:8;\tsigned:0;\n\n\
            print fmt: \"%s %s\", REC->rcuname, REC->msg\n";
        assert_eq!(field_offset(format, "rcuname"), Some(8));
        assert_eq!(field_offset(format, "msg"), Some(16));
        assert_eq!(field_offset(format, "common_pid"), Some(4));
        assert_eq!(field_offset(format, "absent"), None);
    }

    #[test]
    fn arrays_and_strings_are_named_by_their_last_word() {
        let format = "format:\n\
            \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n";
        assert_eq!(field_offset(format, "prev_pid"), Some(24));
        assert_eq!(field_offset(format, "prev_state"), Some(32));
    }
}
