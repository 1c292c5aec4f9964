//! A hash-map entry created on first use, shared by every program family that keys by
//! something (the `--by` counts, the callbacks' rows).

use aya_ebpf::maps::HashMap;

/// BPF_NOEXIST: insert only if the key is new.
const NOEXIST: u64 = 1;

/// The value of `key`, inserted as `init` if absent; `None` when the map is full.
/// Another CPU may create the entry between the lookup and the insert: NOEXIST keeps its
/// value, and the second lookup finds it.
#[inline(always)]
pub fn get_or_insert<K, V>(map: &HashMap<K, V>, key: &K, init: &V) -> Option<*mut V> {
    if let Some(value) = map.get_ptr_mut(key) {
        return Some(value);
    }
    let _ = map.insert(key, init, NOEXIST);
    map.get_ptr_mut(key)
}
