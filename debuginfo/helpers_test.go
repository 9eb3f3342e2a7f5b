package debuginfo

import (
	"debug/elf"
	"os"
)

func openELF(p string) (*elf.File, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return newELF(fh)
}
