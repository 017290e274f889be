//! Memory tuning for a long-lived process whose reloads build large tables:
//! fixed malloc thresholds and a heap trim after each build (glibc only).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::Engine;

/// Keep of a freshly built engine what serving needs: the decision blocks,
/// not the database they were compiled from (its bytes, read into memory
/// for the build, would stay in the RSS).
pub(super) fn for_serving(mut e: Engine) -> Engine {
    e.geo = None;
    trim_heap();
    e
}

/// Fixed malloc thresholds. By default glibc raises both as large blocks
/// are freed, so a reload, which builds on a thread of its own (with an
/// arena of its own, whose top `malloc_trim` never releases), kept some
/// 12 MiB more RSS per reload with GeoLite2-City. Fixed, large build
/// temporaries come from mmap and go back when freed, and any free top of
/// a heap over 1 MiB is returned. The query path allocates nothing.
pub(super) fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 20);
    }
}

/// Drop the engine a reload replaced, once queries in flight let go of it
/// (they hold it for one answer), and hand its memory back: a large zone is
/// many small allocations under the mmap threshold, which glibc would keep.
/// Done on a thread of its own, so the signal loop never waits for it.
pub(super) fn release(old: Arc<Engine>) {
    let work = move || {
        let t = Instant::now();
        while Arc::strong_count(&old) > 1 && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(old);
        trim_heap();
    };
    // Without a thread the engine is dropped whenever the last query lets go.
    let _ = std::thread::Builder::new()
        .name("meridian-release".into())
        .spawn(work);
}

/// Hand the heap a build used back to the system: glibc keeps freed memory
/// otherwise, ~150 MiB after compiling GeoLite2-City.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
