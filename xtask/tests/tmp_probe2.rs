use std::time::Instant;
use xtask::vm::{self, GuestJob, Kernel};
#[test]
fn timing() {
    for k in ["6.1", "6.12"] {
        for files in [false, true] {
            for _ in 0..3 {
                let mut job = GuestJob::new(Kernel::Series(k.into()), "true");
                if files {
                    job = job.file(xtask::workspace::release_binary("rcutrace"), "/bin/rcutrace")
                        .file(xtask::workspace::release_binary("rcu-workload"), "/bin/rcu-workload");
                }
                let t = Instant::now();
                let out = vm::run(&job, false).unwrap();
                let total = t.elapsed();
                eprintln!("{k} files={files}: to userspace {:.2}s, qemu {:.2}s, total {:.2}s (initramfs+setup {:.2}s)",
                    out.boot_time.unwrap().as_secs_f64(), out.elapsed.as_secs_f64(), total.as_secs_f64(), (total - out.elapsed).as_secs_f64());
            }
        }
    }
}
