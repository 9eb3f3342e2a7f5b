// Command pprofcli is upstream pprof (github.com/google/pprof) without its
// interactive line editor, for tests: unlike `go tool pprof`, whose object
// reader knows no build IDs and so refuses every file PPROF_BINARY_PATH
// finds for a mapping that has one, it symbolizes with GNU binutils and
// finds debug files by build ID, as users of native profiles run it.
package main

import (
	"fmt"
	"os"

	"github.com/google/pprof/driver"
)

func main() {
	if err := driver.PProf(&driver.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "pprof: %v\n", err)
		os.Exit(2)
	}
}
