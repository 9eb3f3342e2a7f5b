// Package debuginfod fetches separate debug files by build ID from
// debuginfod servers (elfutils' protocol: GET URL/buildid/ID/debuginfo)
// into the cache elfutils clients use, so that stacktop, eu-stack and
// gdb share what any of them downloaded.
//
// # Configuration
//
// As elfutils: DEBUGINFOD_URLS lists the servers, separated by spaces;
// DEBUGINFOD_CACHE_PATH (else $XDG_CACHE_HOME/debuginfod_client, else
// ~/.cache/debuginfod_client) is the cache, one directory per build ID
// holding a file named debuginfo; DEBUGINFOD_TIMEOUT (seconds) bounds
// the wait for a server's reply, DEBUGINFOD_MAXSIZE (bytes) the size of
// a file. stacktop's --no-debuginfod turns fetching off; the cache is
// still read (debuginfo.Locator looks there like any debug directory).
//
// # Lifecycle
//
// A Client is made once per run (FromEnv). Prefetch runs before stacktop
// attaches: it lists the target's mapped objects, and for each one that
// has a build ID and no local debug file it fetches one. So no download
// ever happens while a thread of the target is stopped, and the
// symboliser later finds the files in the cache as if installed.
//
// # Untrusted input
//
// A server's reply is untrusted: the download is bounded by MaxSize
// (Content-Length is checked first, the body is cut one byte past it),
// written to a temporary file in the cache and renamed into place only
// once it parses as ELF (debug/elf, its panics recovered) and carries the
// build ID asked for. Everything that reads it later (symbols, DWARF
// lines) is the same code, with the same fuzz targets, that reads local
// debug files. Build IDs are checked to be hex before they go into a
// path or URL.
//
// # Failures
//
// A server that cannot be reached is reported once, in one line on the
// progress writer, and not asked again during the run; a build ID no
// server has is not an error worth a line (most system libraries are not
// on any given server). Downloads that last more than a second show
// their progress on the same writer.
package debuginfod
