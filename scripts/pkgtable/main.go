// Command pkgtable keeps README.md's package table in step with the tree:
// one row per package `go list ./...` lists, in its order. A row's
// description is the README's own where it has one (a sentence written for
// a reader of the README, shorter than a package doc); a package new to the
// table gets its doc comment's first sentence, to be shortened by hand.
// Rows of packages that no longer exist are dropped.
//
//	go run ./scripts/pkgtable          rewrite README.md
//	go run ./scripts/pkgtable -check   fail if it would change (scripts/lint.sh)
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

const (
	readme = "README.md"
	header = "| package | what it is |\n|---|---|\n"
)

type pkg struct {
	ImportPath string
	Dir        string
	Doc        string
	Module     *struct{ Path, Dir string }
}

func main() {
	check := flag.Bool("check", false, "only report whether README.md's table is up to date")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "pkgtable:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	pkgs, err := listPackages()
	if err != nil {
		return err
	}
	old, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	start := bytes.Index(old, []byte(header))
	if start < 0 {
		return fmt.Errorf("%s: no table starting %q", readme, header)
	}
	body := start + len(header)
	end := body
	for end < len(old) && old[end] == '|' {
		nl := bytes.IndexByte(old[end:], '\n')
		if nl < 0 {
			end = len(old)
			break
		}
		end += nl + 1
	}
	described := parseRows(string(old[body:end]))
	var table strings.Builder
	for _, p := range pkgs {
		desc, ok := described[p.rel()]
		if !ok {
			desc = synopsis(p.Doc)
		}
		fmt.Fprintf(&table, "| `%s` | %s |\n", p.rel(), desc)
	}
	updated := append(append(append([]byte{}, old[:body]...), table.String()...), old[end:]...)
	if bytes.Equal(updated, old) {
		return nil
	}
	if check {
		return fmt.Errorf("%s's package table does not match `go list ./...`; run `go run ./scripts/pkgtable` and edit the new rows", readme)
	}
	return os.WriteFile(readme, updated, 0o644)
}

// rel is the package's directory in the module, with a trailing slash.
func (p pkg) rel() string {
	return strings.TrimPrefix(p.ImportPath, p.Module.Path+"/") + "/"
}

func listPackages() ([]pkg, error) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,Doc,Module", "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if p.Module != nil {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// parseRows maps each row's package (its first cell, unquoted) to its
// description.
func parseRows(rows string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(rows, "\n") {
		cells := strings.SplitN(strings.Trim(line, "|"), "|", 2)
		if len(cells) != 2 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		m[name] = strings.TrimSpace(cells[1])
	}
	return m
}

// synopsis is the first sentence of a package doc, without the "Package x"
// or "Command x" it starts with, for a row the README has no words for yet.
func synopsis(doc string) string {
	doc = strings.ReplaceAll(doc, "|", `\|`)
	for _, prefix := range []string{"Package ", "Command "} {
		if strings.HasPrefix(doc, prefix) {
			if i := strings.IndexByte(doc[len(prefix):], ' '); i >= 0 {
				doc = doc[len(prefix)+i+1:]
			}
		}
	}
	return strings.TrimSuffix(doc, ".")
}
