//! The C ABI the MPI side (c/concerto_mpiio.c) calls. Every function
//! returns 0 on success, else -1 with the reason kept for
//! [`cmpi_last_error`]; a panic is caught here and reported the same way
//! (it must not unwind into C).

use std::cell::RefCell;
use std::ffi::{c_char, CStr};

use concerto_client::proto::LayoutRequest;
use concerto_core::client::collective::Direction;

use crate::access::Access;
use crate::collective::{Execution, Step};
use crate::datatype::Typemap;
use crate::hints::Hints;
use crate::session::{self, Amode, OpenFile, Session};
use crate::view::View;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// `cmpi_open`'s mode bits.
pub mod mode {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const CREATE: u32 = 4;
    pub const EXCLUSIVE: u32 = 8;
    pub const APPEND: u32 = 16;
    pub const DELETE_ON_CLOSE: u32 = 32;
}

/// Runs `f`, turning its error or panic into -1 and the last error.
fn guard(f: impl FnOnce() -> Result<(), String>) -> i32 {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!(
            "internal error in the Concerto MPI-IO library: {what}"
        ))
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            LAST_ERROR.with(|l| *l.borrow_mut() = e);
            -1
        }
    }
}

/// # Safety
/// `s` is a NUL-terminated string (or null).
unsafe fn text(s: *const c_char) -> Result<String, String> {
    if s.is_null() {
        return Err("a null string".into());
    }
    // SAFETY: the caller passes a C string.
    Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// # Safety
/// `keys` and `values` hold `n` C strings each.
unsafe fn pairs(
    keys: *const *const c_char,
    values: *const *const c_char,
    n: usize,
) -> Result<Vec<(String, String)>, String> {
    (0..n)
        .map(|i| {
            // SAFETY: the caller passes n strings in each array.
            unsafe { Ok((text(*keys.add(i))?, text(*values.add(i))?)) }
        })
        .collect()
}

/// # Safety
/// `words` holds `n` integers (or `n` is 0).
unsafe fn typemap(words: *const i64, n: usize) -> Result<Typemap, String> {
    if n == 0 {
        return Err("an empty datatype description".into());
    }
    // SAFETY: the caller passes n words.
    Typemap::decode(unsafe { std::slice::from_raw_parts(words, n) })
}

/// Copies the last error (NUL-terminated, cut to `cap`) into `buf`.
///
/// # Safety
/// `buf` has room for `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn cmpi_last_error(buf: *mut c_char, cap: usize) {
    LAST_ERROR.with(|l| {
        let l = l.borrow();
        let n = l.len().min(cap.saturating_sub(1));
        // SAFETY: the caller gives cap bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(l.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
    });
}

/// Whether `name` is Concerto's: 1 with its namespace path in `out`, 0 if
/// not (the MPI library's), -1 if the path does not fit in `cap`.
///
/// # Safety
/// `name` is a C string; `out` has room for `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn cmpi_resolve(name: *const c_char, out: *mut c_char, cap: usize) -> i32 {
    // SAFETY: as documented.
    let Ok(name) = (unsafe { text(name) }) else {
        return 0;
    };
    match session::resolve(&name) {
        None => 0,
        Some(p) if p.len() + 1 > cap => -1,
        Some(p) => {
            // SAFETY: it fits in cap bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), out as *mut u8, p.len());
                *out.add(p.len()) = 0;
            }
            1
        }
    }
}

/// Opens (or, when `create_here`, creates) a namespace path with the
/// `mode` bits and hints; its id in `id`.
///
/// # Safety
/// C strings and arrays as for [`pairs`]; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_open(
    path: *const c_char,
    mode_bits: u32,
    create_here: i32,
    keys: *const *const c_char,
    values: *const *const c_char,
    n: usize,
    id: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let (path, hints) = unsafe { (text(path)?, pairs(keys, values, n)?) };
        let amode = Amode {
            read: mode_bits & mode::READ != 0,
            write: mode_bits & mode::WRITE != 0,
            create: mode_bits & mode::CREATE != 0,
            exclusive: mode_bits & mode::EXCLUSIVE != 0,
            append: mode_bits & mode::APPEND != 0,
            delete_on_close: mode_bits & mode::DELETE_ON_CLOSE != 0,
        };
        let hints = Hints::default().with(&hints)?;
        let s = Session::get()?;
        let handle = if create_here != 0 {
            let layout = LayoutRequest {
                unit: hints.striping_unit,
                count: hints.striping_factor,
            };
            s.run(s.client.create(&path, layout, amode.exclusive))
        } else {
            s.run(s.client.open(&path, amode.write))
        }?;
        let view = View::default();
        let pointer = if amode.append {
            view.position_of(s.run(s.client.fstat(&handle))?.size)
        } else {
            0
        };
        let file = OpenFile {
            path,
            handle,
            amode,
            view,
            pointer,
            hints,
            size_floor: 0,
        };
        // SAFETY: the caller gives a writable id.
        unsafe { *id = session::register(file) };
        Ok(())
    })
}

/// Closes a file: what this rank wrote is made durable.
#[no_mangle]
pub extern "C" fn cmpi_close(id: u64) -> i32 {
    guard(|| {
        let file = session::remove(id)?;
        let f = file.lock().unwrap_or_else(|p| p.into_inner());
        let s = Session::get()?;
        s.run(s.client.close(&f.handle))
            .map_err(|e| format!("{}: {e}", f.path))
    })
}

/// Removes a namespace path.
///
/// # Safety
/// `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn cmpi_delete(path: *const c_char) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let path = unsafe { text(path)? };
        let s = Session::get()?;
        s.run(s.client.unlink(&path))
    })
}

/// Sets the view (displacement, elementary type and filetype as
/// descriptions, see `datatype`) and applies the hints; the file pointer
/// goes back to 0.
///
/// # Safety
/// Arrays and strings as their lengths say.
#[no_mangle]
pub unsafe extern "C" fn cmpi_set_view(
    id: u64,
    disp: i64,
    etype: *const i64,
    etype_words: usize,
    filetype: *const i64,
    filetype_words: usize,
    keys: *const *const c_char,
    values: *const *const c_char,
    n: usize,
) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let (etype, filetype, hints) = unsafe {
            (
                typemap(etype, etype_words)?,
                typemap(filetype, filetype_words)?,
                pairs(keys, values, n)?,
            )
        };
        let disp = u64::try_from(disp).map_err(|_| format!("a negative displacement ({disp})"))?;
        let file = session::get(id)?;
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        let view = View::new(disp, &etype, &filetype)?;
        f.hints = f.hints.with(&hints)?;
        f.view = view;
        f.pointer = 0;
        Ok(())
    })
}

/// Applies hints to an open file.
///
/// # Safety
/// Arrays as for [`pairs`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_set_info(
    id: u64,
    keys: *const *const c_char,
    values: *const *const c_char,
    n: usize,
) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let hints = unsafe { pairs(keys, values, n)? };
        let file = session::get(id)?;
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        f.hints = f.hints.with(&hints)?;
        Ok(())
    })
}

/// The hints in effect, as `key=value` lines, into `buf` (NUL-terminated).
///
/// # Safety
/// `buf` has room for `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn cmpi_info(id: u64, buf: *mut c_char, cap: usize) -> i32 {
    guard(|| {
        let file = session::get(id)?;
        let f = file.lock().unwrap_or_else(|p| p.into_inner());
        let layout = (f.handle.layout.unit(), f.handle.layout.stripe_count());
        let text: String = f
            .hints
            .report(layout)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        if text.len() + 1 > cap {
            return Err("the hints do not fit the buffer".into());
        }
        // SAFETY: it fits in cap bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, text.len());
            *buf.add(text.len()) = 0;
        }
        Ok(())
    })
}

fn with_file<T>(
    id: u64,
    f: impl FnOnce(&Session, &mut OpenFile) -> Result<T, String>,
) -> Result<T, String> {
    let file = session::get(id)?;
    let mut g = file.lock().unwrap_or_else(|p| p.into_inner());
    let s = Session::get()?;
    f(s, &mut g)
}

/// Whether the collective access runs as each rank's independent call
/// (core's `Buffering::runs_independent`, by the file's hints and stripe
/// unit): `spans` holds `n` pairs, each rank's first byte and end, of the
/// ranks with data. 1 yes, 0 no.
///
/// # Safety
/// As [`the`]; `spans` has `2 n` entries.
#[no_mangle]
pub unsafe extern "C" fn cmpi_runs_independent(a: *mut Access, spans: *const u64, n: u64) -> i32 {
    // SAFETY: as documented.
    let a = unsafe { the(a) };
    let flat: &[u64] = if n == 0 {
        &[]
    } else {
        // SAFETY: as documented.
        unsafe { std::slice::from_raw_parts(spans, 2 * n as usize) }
    };
    let mut pairs: Vec<(u64, u64)> = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let unit = a.handle.layout.unit();
    i32::from(
        a.hints
            .buffering(a.direction)
            .runs_independent(&mut pairs, unit),
    )
}

/// A fingerprint of the hints in effect on a file (ranks whose hints
/// differ would plan differently); 0 for a file not open.
#[no_mangle]
pub extern "C" fn cmpi_hints_fingerprint(id: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    session::get(id).map_or(0, |file| {
        let f = file.lock().unwrap_or_else(|p| p.into_inner());
        // DefaultHasher::new() is unkeyed: the same on every rank.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{:?}", f.hints).hash(&mut h);
        h.finish()
    })
}

/// The file's size in bytes.
///
/// # Safety
/// `size` is writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_size(id: u64, size: *mut u64) -> i32 {
    guard(|| {
        let n = with_file(id, |s, f| f.size(s))?;
        // SAFETY: as documented.
        unsafe { *size = n };
        Ok(())
    })
}

/// Cuts or extends the file to `size` bytes; with `grow_only`, only
/// extends (`MPI_File_preallocate`). Every rank's held writes have landed
/// (the caller settles them first).
#[no_mangle]
pub extern "C" fn cmpi_set_size(id: u64, size: u64, grow_only: i32) -> i32 {
    guard(|| {
        with_file(id, |s, f| {
            if !f.amode.write {
                return Err(format!("{}: opened read-only (MPI_MODE_RDONLY)", f.path));
            }
            if grow_only != 0 && s.run(s.client.fstat(&f.handle))?.size >= size {
                return Ok(());
            }
            s.run(s.client.truncate(&f.path, size))
        })
    })
}

/// The file's size is at least `end` (a collective write's end, which
/// every rank holds behind: [`OpenFile::size_floor`]).
#[no_mangle]
pub extern "C" fn cmpi_size_at_least(id: u64, end: u64) -> i32 {
    guard(|| {
        with_file(id, |_, f| {
            f.size_floor = f.size_floor.max(end);
            Ok(())
        })
    })
}

/// A collective call set the file's size (every rank's held writes landed
/// first): the servers' size is the file's.
#[no_mangle]
pub extern "C" fn cmpi_size_was_set(id: u64) -> i32 {
    guard(|| {
        with_file(id, |_, f| {
            f.size_floor = 0;
            Ok(())
        })
    })
}

/// Sends the writes this rank holds behind on the file and waits for
/// them (before a collective call: the other ranks' agents then read them).
#[no_mangle]
pub extern "C" fn cmpi_settle(id: u64) -> i32 {
    guard(|| with_file(id, |s, f| s.run(s.client.settle_writes(&f.handle))))
}

/// Makes what this rank wrote durable.
#[no_mangle]
pub extern "C" fn cmpi_sync(id: u64) -> i32 {
    guard(|| with_file(id, |s, f| s.run(s.client.fsync(&f.handle))))
}

/// Moves the individual file pointer (`whence`: 0 set, 1 current, 2 end).
#[no_mangle]
pub extern "C" fn cmpi_seek(id: u64, offset: i64, whence: i32) -> i32 {
    guard(|| {
        with_file(id, |s, f| {
            let base = match whence {
                0 => 0,
                1 => f.pointer as i64,
                2 => (f.view.position_of(f.size(s)?) / f.view.etype_size) as i64,
                w => return Err(format!("unknown whence {w}")),
            };
            let at = base
                .checked_add(offset)
                .filter(|&a| a >= 0)
                .ok_or_else(|| format!("seek to a negative position ({base} {offset:+})"))?;
            f.pointer = at as u64;
            Ok(())
        })
    })
}

/// The individual file pointer, in elementary types.
///
/// # Safety
/// `at` is writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_position(id: u64, at: *mut i64) -> i32 {
    guard(|| {
        let p = with_file(id, |_, f| Ok(f.pointer as i64))?;
        // SAFETY: as documented.
        unsafe { *at = p };
        Ok(())
    })
}

/// The absolute byte offset of view offset `offset` (elementary types).
///
/// # Safety
/// `bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_byte_offset(id: u64, offset: i64, bytes: *mut i64) -> i32 {
    guard(|| {
        let offset = u64::try_from(offset).map_err(|_| format!("a negative offset ({offset})"))?;
        let b = with_file(id, |_, f| {
            Ok(f.extents(offset, 1).first().map_or(0, |e| e.offset) as i64)
        })?;
        // SAFETY: as documented.
        unsafe { *bytes = b };
        Ok(())
    })
}

/// Starts a read or write (`write` != 0) of `count` elements of the
/// datatype described by `desc` at `buf`, at `offset` elementary types of
/// the view (the individual file pointer when `offset` < 0); the access
/// in `access`, for the calls below and then [`cmpi_free`].
///
/// # Safety
/// `buf` holds the elements; `desc` has `words` integers; `access` is writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_access(
    id: u64,
    offset: i64,
    buf: *mut u8,
    count: u64,
    desc: *const i64,
    words: usize,
    write: i32,
    access: *mut *mut Access,
) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let memtype = unsafe { typemap(desc, words)? };
        let file = session::get(id)?;
        let direction = if write != 0 {
            Direction::Write
        } else {
            Direction::Read
        };
        let a = Access::new(
            &file,
            u64::try_from(offset).ok(),
            buf,
            count,
            &memtype,
            direction,
        )?;
        // SAFETY: as documented.
        unsafe { *access = Box::into_raw(Box::new(a)) };
        Ok(())
    })
}

/// # Safety
/// `a` came from [`cmpi_access`] and was not freed.
unsafe fn the<'a>(a: *mut Access) -> &'a mut Access {
    // SAFETY: as documented.
    unsafe { &mut *a }
}

/// Runs an access as an independent call.
///
/// # Safety
/// As [`the`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_independent(a: *mut Access) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let a = unsafe { the(a) };
        let s = Session::get()?;
        a.run_independent(s)?;
        a.count_to_end(s)
    })
}

/// Runs a collective access as this rank's independent call (a read's
/// count is the collective's to settle, across ranks). A write is held
/// behind as an independent one is: in MPI's nonatomic mode another rank
/// sees it only after a sync, and the file's next planned call sends what
/// every rank holds before any agent reads. The simulator's collective
/// applications hold such a call alike (`model::write_behind`).
///
/// # Safety
/// As [`the`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_independent_part(a: *mut Access) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let a = unsafe { the(a) };
        a.run_independent(Session::get()?)
    })
}

/// The access's file extents as (offset, length) pairs: their number and
/// where they are (valid until the access is freed).
///
/// # Safety
/// As [`the`]; the pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_extents(a: *mut Access, pairs: *mut *const u64, n: *mut u64) {
    // SAFETY: as documented.
    let a = unsafe { the(a) };
    let flat = a.flat_extents();
    // SAFETY: as documented.
    unsafe {
        *n = (flat.len() / 2) as u64;
        *pairs = flat.as_ptr();
    }
}

/// Plans the collective call from every rank's extents (`counts[r]`
/// pairs of rank `r`, one after the other in `all`) with the file's
/// hints, and prepares this rank's part of the plan.
///
/// # Safety
/// As [`the`]; `counts` has `ranks` entries, `all` their sum in pairs.
#[no_mangle]
pub unsafe extern "C" fn cmpi_plan(
    a: *mut Access,
    ranks: u32,
    me: u32,
    counts: *const u64,
    all: *const u64,
) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let a = unsafe { the(a) };
        let counts = unsafe { std::slice::from_raw_parts(counts, ranks as usize) };
        let total: u64 = counts.iter().sum();
        let all = unsafe { std::slice::from_raw_parts(all, 2 * total as usize) };
        let mut accesses = Vec::with_capacity(ranks as usize);
        let mut at = 0usize;
        for &c in counts {
            let list = all[at..at + 2 * c as usize]
                .chunks_exact(2)
                .map(|p| concerto_core::Extent::new(p[0], p[1]))
                .collect::<Vec<_>>();
            at += 2 * c as usize;
            accesses.push(list);
        }
        let choice = a.hints.planner(a.direction)?;
        let planner = choice.planner().map_err(|e| format!("hints: {e}"))?;
        let plan = planner
            .plan(a.direction, &accesses, &a.handle.layout)
            .map_err(|e| format!("the {} plan: {e}", planner.name()))?;
        a.execution = Some(Execution::new(plan, me, a));
        Ok(())
    })
}

/// The next step of this rank's part of the plan for the MPI side.
///
/// # Safety
/// As [`the`], after [`cmpi_plan`]; `step` is writable.
#[no_mangle]
pub unsafe extern "C" fn cmpi_step(a: *mut Access, step: *mut Step) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let a = unsafe { the(a) };
        let s = Session::get()?;
        let mut e = a.execution.take().ok_or("no plan to step through")?;
        let next = e.step(s, a);
        a.execution = Some(e);
        // SAFETY: as documented.
        unsafe { *step = next };
        Ok(())
    })
}

/// After the MPI side has waited for every request: a read's bytes into
/// the caller's buffer; this rank's error if its part failed.
///
/// # Safety
/// As [`the`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_finish(a: *mut Access) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let a = unsafe { the(a) };
        let mut e = a.execution.take().ok_or("no plan to finish")?;
        let r = e.finish(a);
        a.execution = Some(e);
        r
    })
}

/// Whether some byte this rank read was a hole or past the end of the file.
///
/// # Safety
/// As [`the`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_incomplete(a: *mut Access) -> i32 {
    // SAFETY: as documented.
    i32::from(unsafe { the(a) }.incomplete)
}

/// Counts a read's bytes up to the end of the file (after some rank's
/// read of the collective call met it).
///
/// # Safety
/// As [`the`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_count_to_end(a: *mut Access) -> i32 {
    guard(|| {
        // SAFETY: as documented.
        let a = unsafe { the(a) };
        a.incomplete = true;
        a.count_to_end(Session::get()?)
    })
}

/// The bytes the access moved.
///
/// # Safety
/// As [`the`].
#[no_mangle]
pub unsafe extern "C" fn cmpi_bytes(a: *mut Access) -> u64 {
    // SAFETY: as documented.
    unsafe { the(a) }.bytes
}

/// Frees an access.
///
/// # Safety
/// `a` came from [`cmpi_access`]; it is not used again.
#[no_mangle]
pub unsafe extern "C" fn cmpi_free(a: *mut Access) {
    if !a.is_null() {
        // SAFETY: as documented.
        drop(unsafe { Box::from_raw(a) });
    }
}
