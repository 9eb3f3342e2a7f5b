package debuginfo

import (
	"os"
	"path/filepath"
)

// DebuginfodCacheDir is the cache directory elfutils' debuginfod client
// uses, so that stacktop, eu-stack and gdb share what any of them
// downloaded: $DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client,
// else $HOME/.cache/debuginfod_client. "" if none can be named.
func DebuginfodCacheDir() string {
	if p := os.Getenv("DEBUGINFOD_CACHE_PATH"); p != "" {
		return p
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "debuginfod_client")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "debuginfod_client")
	}
	return ""
}

// DebuginfodCachePath is where the debuginfod cache keeps the debug file
// of buildID (DIR/BUILDID/debuginfo); "" if buildID is not lowercase hex
// or there is no cache directory.
func DebuginfodCachePath(buildID string) string {
	if !IsBuildID(buildID) {
		return ""
	}
	dir := DebuginfodCacheDir()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, buildID, "debuginfo")
}

// IsBuildID tells whether s looks like a build ID as stacktop spells
// them: an even number (at least 2) of lowercase hex digits. It is what
// makes a build ID safe to put in a path or a URL.
func IsBuildID(s string) bool {
	if len(s) < 2 || len(s)%2 != 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
