// Package targetfile opens files on a target process's behalf: the files
// behind its mappings, its debug files, its perf map. stacktop runs as root
// against processes it does not trust, and each of those paths is one the
// target chose: a FIFO that blocks an open for ever, a device whose open
// has side effects, a symlink to /etc/shadow, a symlink inside a
// container's root that points into the host's, a file on a FUSE mount the
// target serves itself and stops answering while it is traced.
//
// # What an open checks
//
// An Opener resolves a path the way the target would see it: inside Root
// (the target's /proc/PID/root) with openat2's RESOLVE_IN_ROOT, so an
// absolute symlink in a container stays in the container, and never
// through a /proc magic link. The path is first opened with O_PATH, which
// neither blocks nor opens a device, and the file is checked before it is
// opened for reading:
//
//   - it is a regular file (no FIFO, socket or device), no bigger than
//     MaxSize;
//   - with a Reader, it is owned by the reader or by root, and the reader
//     could read it itself: stacktop's privileges never read a file the
//     target's user could not.
//
// The file is then reopened for reading through /proc/self/fd, which
// names the inode checked, not the path, so a rename in between cannot
// swap it.
//
// # Deadlines
//
// Every open runs under a deadline (DefaultDeadline). On a local file
// system an open takes microseconds; on FUSE or a network file system a
// path lookup waits for a server, which may be the very process that is
// stopped. An open past its deadline returns ErrStalled at once and is
// left to finish in the background (its file is then closed); later opens
// in the same directory fail at once while it is pending, so one stuck
// mount costs one deadline, not one per candidate path. Reads of a file on
// such a file system go through the same deadline (File.ReadAt); reads of
// local files are plain preads.
package targetfile
