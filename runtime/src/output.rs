//! Where results land (`-o`): a regular file is replaced atomically (a temporary file
//! beside it, renamed over it once complete, so a failed or killed run leaves the old file
//! whole), keeping the replaced file's permissions; a device, a FIFO or a terminal (also
//! through a symbolic link) is written through, never replaced by a regular file; one of
//! the process's own descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`) is
//! written through that descriptor, whatever it is open on (a file the shell appends to
//! stays appended to); a symbolic link to a regular file keeps its link, and its target is
//! replaced. Temporary files are made only when the writing starts and are named
//! `.NAME.mmac-PID-XXXXXX.part`; SIGINT, SIGTERM and SIGHUP remove them before the
//! process ends (a signal the process was started ignoring, as under `nohup`, stays
//! ignored); a later run writing the same NAME removes those whose process no longer
//! runs (`kill -9` leftovers).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Why an output cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot create {path}: {why}")]
    Create { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How the destination is written.
#[derive(Debug)]
enum Target {
    /// A regular file (or none yet) at this path, replaced by a renamed temporary file.
    Replace(PathBuf),
    /// Anything else (a character device, a FIFO, a socket): opened and written in place.
    Through(PathBuf),
    /// One of the process's open descriptors (`/dev/stdout`: 1), written through it.
    Descriptor(i32),
}

/// An output file on its way.
#[derive(Debug)]
pub struct Output {
    /// The destination as the user named it (for messages).
    path: PathBuf,
    target: Target,
    /// Bytes the writing is expected to come to ([`Output::expecting`]).
    expected: Option<u64>,
}

impl Output {
    /// Check that `path` can be written, before any work is done: an error names it and
    /// says why not (no such folder, a folder in the way, no permission). Nothing is
    /// created yet.
    pub fn create(path: &Path) -> Result<Output, OutputError> {
        let cannot = |why: String| OutputError::Create {
            path: path.to_path_buf(),
            why,
        };
        if let Some(fd) = own_descriptor(path) {
            return Ok(Output {
                path: path.to_path_buf(),
                target: Target::Descriptor(fd),
                expected: None,
            });
        }
        // what the path names, symbolic links followed (the links themselves stay)
        let target = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(cannot("it is a folder".into())),
            Ok(m) if m.is_file() => {
                Target::Replace(std::fs::canonicalize(path).map_err(|e| cannot(e.to_string()))?)
            }
            // a device, a FIFO, a socket, a terminal, a pipe (`/dev/stdout`): written
            // through, opened only when the writing starts (a FIFO waits for its reader)
            Ok(_) => Target::Through(path.to_path_buf()),
            Err(_) if path.symlink_metadata().is_ok() => {
                return Err(cannot("it is a symbolic link to nothing".into()));
            }
            Err(_) => Target::Replace(path.to_path_buf()),
        };
        if let Target::Replace(p) = &target {
            let dir = folder_of(p);
            if !dir.is_dir() {
                return Err(cannot(format!("there is no folder {}", dir.display())));
            }
            // can a file be made there? (made and removed at once)
            tempfile::Builder::new()
                .prefix(".mmac-probe-")
                .tempfile_in(&dir)
                .map_err(|e| cannot(e.to_string()))?;
        }
        Ok(Output {
            path: path.to_path_buf(),
            target,
            expected: None,
        })
    }

    /// Say how many bytes the writing will come to. A regular file's temporary file then
    /// gets that much disk before anything is written (its size stays what is written):
    /// a full disk is an error before any work, and the file system need not allocate the
    /// whole file when it is renamed over an older one (ext4 does, in the rename: a 16 MB
    /// D replaced in 8-12 ms without, 1 ms with, docs/performance.md). Blocks reserved
    /// beyond what is written stay the file's: say at most what will be written
    /// ([`crate::matrix::npy_size`] never says more than a `.npy` takes).
    pub fn expecting(mut self, bytes: u64) -> Output {
        self.expected = Some(bytes);
        self
    }

    /// Whether nothing reaches the destination unless the writing succeeds (a regular
    /// file, replaced whole), so that it may be written while its content is still being
    /// computed; a device or a FIFO sees every byte as it is written.
    pub fn replaces_whole(&self) -> bool {
        matches!(self.target, Target::Replace(_))
    }

    /// The destination, as named.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file that will be written or replaced (symbolic links followed).
    pub fn target(&self) -> &Path {
        match &self.target {
            Target::Replace(p) | Target::Through(p) => p,
            Target::Descriptor(_) => &self.path,
        }
    }

    /// Write `bytes` and put them in place.
    pub fn finish_bytes(self, bytes: &[u8]) -> Result<(), OutputError> {
        self.write_with(|out| out.write_all(bytes))
    }

    /// Write what `write` writes (buffered) and put it in place: a regular file is
    /// replaced only once `write` succeeded; anything else is written as it goes.
    pub fn write_with(
        self,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), OutputError> {
        let io = |source| OutputError::Io {
            path: self.path.clone(),
            source,
        };
        match &self.target {
            Target::Through(p) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .map_err(io)?;
                let mut out = std::io::BufWriter::new(file);
                write(&mut out).map_err(io)?;
                out.flush().map_err(io)?;
                Ok(())
            }
            &Target::Descriptor(fd) => {
                if fd == 1 {
                    // (through std's handle: what the program printed before is flushed
                    // first, so the bytes land in the order they were written)
                    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                    write(&mut out).map_err(io)?;
                    return out.flush().map_err(io);
                }
                let mut out = std::io::BufWriter::new(descriptor_file(fd).map_err(io)?);
                write(&mut out).map_err(io)?;
                out.flush().map_err(io)
            }
            Target::Replace(p) => {
                let dir = folder_of(p);
                let name = file_name(p);
                remove_leftovers(&dir, &name);
                let mut builder = tempfile::Builder::new();
                let prefix = format!(".{name}.mmac-{}-", std::process::id());
                builder.prefix(&prefix).suffix(".part");
                // the permissions of the file replaced, or of a file made with
                // File::create (0o666 less the umask), not the temporary file's 0o600
                #[cfg(unix)]
                builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
                let mut file = builder.tempfile_in(&dir).map_err(io)?;
                let _removed_on_signal = interrupts::Registered::new(file.path());
                if let Some(bytes) = self.expected {
                    reserve(file.as_file(), bytes).map_err(io)?;
                }
                if let Ok(old) = std::fs::metadata(p) {
                    file.as_file()
                        .set_permissions(old.permissions())
                        .map_err(io)?;
                }
                let mut out = std::io::BufWriter::new(file.as_file_mut());
                write(&mut out).map_err(io)?;
                out.flush().map_err(io)?;
                drop(out);
                file.persist(p).map_err(|e| io(e.error))?;
                Ok(())
            }
        }
    }
}

/// Give `file` (empty, just made) `bytes` of disk without changing its size
/// (`FALLOC_FL_KEEP_SIZE`: what is written decides the size, whatever was reserved). A
/// file system that cannot allocate ahead is written as if nothing had been asked; a
/// full disk or quota, a size beyond the file system's largest file, or one beyond the
/// process's file size limit (`ulimit -f`, which would otherwise kill the process with
/// SIGXFSZ midway) is an error.
#[cfg(target_os = "linux")]
fn reserve(file: &std::fs::File, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(bytes) else {
        return Ok(());
    };
    if len == 0 {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives on this stack
    let limited = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY;
    if limited && bytes > limit.rlim_cur {
        return Err(std::io::Error::other(format!(
            "it would take {bytes} bytes, beyond this process's file size limit of {} \
             (ulimit -f)",
            limit.rlim_cur
        )));
    }
    // SAFETY: fallocate on a descriptor the borrowed file keeps open; it passes no memory
    let r = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => Err(e),
        // (EOPNOTSUPP, EINVAL, ...: no allocation ahead here)
        _ => Ok(()),
    }
}

#[cfg(not(target_os = "linux"))]
fn reserve(_: &std::fs::File, _: u64) -> std::io::Result<()> {
    Ok(())
}

/// The descriptor of this process that `path` names (`/dev/stdout`, `/dev/stderr`,
/// `/dev/fd/N`, `/proc/self/fd/N`, or a symbolic link that leads to one), if it is open.
fn own_descriptor(path: &Path) -> Option<i32> {
    let mut p = path.to_path_buf();
    // (a bounded walk: a loop of links ends it)
    for _ in 0..40 {
        let fd = match p.to_str()? {
            "/dev/stdout" => Some(1),
            "/dev/stderr" => Some(2),
            s => s
                .strip_prefix("/dev/fd/")
                .or_else(|| s.strip_prefix("/proc/self/fd/"))
                .or_else(|| s.strip_prefix(&format!("/proc/{}/fd/", std::process::id())))
                .and_then(|n| n.parse::<i32>().ok()),
        };
        if let Some(fd) = fd {
            // open? (an error for a descriptor that is not)
            let open = std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok()
                || !Path::new("/proc/self").exists();
            return open.then_some(fd);
        }
        let link = std::fs::read_link(&p).ok()?;
        p = folder_of(&p).join(link);
    }
    None
}

/// A file of our own for descriptor `fd` (a duplicate), which [`own_descriptor`] found open.
#[cfg(unix)]
fn descriptor_file(fd: i32) -> std::io::Result<std::fs::File> {
    // SAFETY: `fd` is open in this process; it is only borrowed to be duplicated
    let owned = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
    Ok(std::fs::File::from(owned))
}

/// (off unix a descriptor other than stdout cannot be had by its number: an error)
#[cfg(not(unix))]
fn descriptor_file(_: i32) -> std::io::Result<std::fs::File> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Temporary files removed when SIGINT, SIGTERM or SIGHUP ends the process: a handler,
/// installed where the signal still has its default action (a command with its own, such
/// as `prove`, keeps it), unlinks every registered file, then lets the signal end the
/// process as it would have.
#[cfg(unix)]
mod interrupts {
    use std::ffi::CString;
    use std::path::Path;
    use std::sync::Once;
    use std::sync::atomic::{AtomicPtr, Ordering};

    /// Files being written at once (one per output; more are not removed on a signal).
    const SLOTS: usize = 16;
    static FILES: [AtomicPtr<libc::c_char>; SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
    static INSTALL: Once = Once::new();

    extern "C" fn remove_and_end(signal: libc::c_int) {
        for slot in &FILES {
            let p = slot.swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: a C string registered below and never freed while registered
                // (swapped out here first); unlink is async-signal-safe
                unsafe { libc::unlink(p) };
            }
        }
        // SAFETY: the default action restored, then the same signal raised again
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    fn install() {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction queried into a zeroed struct; a handler installed only
            // where the action is the default one
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                    || old.sa_sigaction != libc::SIG_DFL
                {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction =
                    remove_and_end as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    /// A file registered for removal on a signal while this lives.
    pub struct Registered(Option<usize>);

    impl Registered {
        pub fn new(path: &Path) -> Registered {
            use std::os::unix::ffi::OsStrExt;
            INSTALL.call_once(install);
            let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
                return Registered(None);
            };
            let raw = c.into_raw();
            for (i, slot) in FILES.iter().enumerate() {
                if slot
                    .compare_exchange(
                        std::ptr::null_mut(),
                        raw,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    )
                    .is_ok()
                {
                    return Registered(Some(i));
                }
            }
            // SAFETY: `raw` came from `into_raw` just above and was not stored
            drop(unsafe { CString::from_raw(raw) });
            Registered(None)
        }
    }

    impl Drop for Registered {
        fn drop(&mut self) {
            if let Some(i) = self.0 {
                let p = FILES[i].swap(std::ptr::null_mut(), Ordering::SeqCst);
                if !p.is_null() {
                    // SAFETY: registered by `new` from `into_raw`, now out of the slot
                    drop(unsafe { CString::from_raw(p) });
                }
            }
        }
    }
}

#[cfg(not(unix))]
mod interrupts {
    /// (no signals to catch)
    pub struct Registered;
    impl Registered {
        pub fn new(_: &std::path::Path) -> Registered {
            Registered
        }
    }
}

fn folder_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned())
}

/// Remove `.NAME.mmac-PID-*.part` files in `dir` left by runs that no longer run (a
/// process id with no `/proc` entry; where there is no `/proc`, nothing is removed).
fn remove_leftovers(dir: &Path, name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{name}.mmac-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        if !file.ends_with(".part") {
            continue;
        }
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let regular = e.file_type().is_ok_and(|t| t.is_file());
        if regular && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_replaced_whole_and_a_failure_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.txt");
        std::fs::write(&p, "old").unwrap();
        Output::create(&p).unwrap().finish_bytes(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let r = Output::create(&p).unwrap().write_with(|w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }

    /// A reservation gives disk, not size: the file holds what was written, more or less
    /// than expected (with the size changed by the reservation, the short file would end
    /// in zeros).
    #[test]
    fn the_expected_size_reserves_disk_and_the_writing_decides_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.bin");
        std::fs::write(&p, vec![7u8; 1 << 16]).unwrap();
        for (expected, written) in [(1 << 20, 10), (4, 4096), (0, 3), (1 << 20, 1 << 20)] {
            let data: Vec<u8> = (0..written).map(|i| (i % 251) as u8 + 1).collect();
            Output::create(&p)
                .unwrap()
                .expecting(expected)
                .finish_bytes(&data)
                .unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), data, "{expected} expected");
        }
        // the disk was reserved: a file given 1 MiB for 10 bytes holds 1 MiB of blocks
        // (where the file system allocates ahead; a probe says whether it does)
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            let probe = std::fs::File::create(dir.path().join("probe")).unwrap();
            if reserve(&probe, 4096).is_ok() && probe.metadata().unwrap().blocks() > 0 {
                Output::create(&p)
                    .unwrap()
                    .expecting(1 << 20)
                    .finish_bytes(b"0123456789")
                    .unwrap();
                let m = std::fs::metadata(&p).unwrap();
                assert_eq!(m.len(), 10);
                assert!(m.blocks() * 512 >= 1 << 20, "{} blocks", m.blocks());
            }
        }
        // through a device nothing is reserved
        Output::create(Path::new("/dev/null"))
            .unwrap()
            .expecting(1 << 40)
            .finish_bytes(b"x")
            .unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_stays_and_its_target_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        Output::create(&link).unwrap().finish_bytes(b"new").unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_written_through() {
        use std::os::unix::fs::FileTypeExt;
        let is_device = |p: &str| std::fs::metadata(p).unwrap().file_type().is_char_device();
        let o = Output::create(Path::new("/dev/null")).unwrap();
        assert!(matches!(o.target, Target::Through(_)));
        o.finish_bytes(b"gone").unwrap();
        assert!(is_device("/dev/null"));
        // a full device is an error, and stays a device
        if Path::new("/dev/full").exists() {
            let r = Output::create(Path::new("/dev/full"))
                .unwrap()
                .finish_bytes(b"x");
            assert!(r.is_err());
            assert!(is_device("/dev/full"));
        }
    }

    #[cfg(unix)]
    #[test]
    fn leftovers_of_dead_runs_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("D.npy");
        // a run that was killed (a pid that cannot exist) and one that still runs (ours)
        let dead = dir.path().join(".D.npy.mmac-4294967295-abc123.part");
        let alive = dir
            .path()
            .join(format!(".D.npy.mmac-{}-zzz.part", std::process::id()));
        let other = dir.path().join(".E.npy.mmac-4294967295-abc.part");
        for f in [&dead, &alive, &other] {
            std::fs::write(f, "junk").unwrap();
        }
        Output::create(&p).unwrap().finish_bytes(b"d").unwrap();
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists());
    }
}
