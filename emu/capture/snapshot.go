//go:build linux

package main

// Snapshots for testdata/cross: a walk's unwind.Snapshot and its symbol
// sidecar, printed gzip+base64 between markers for emu/run.sh to store.

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"codeberg.org/stacktop/stacktop/ptrace"
	"codeberg.org/stacktop/stacktop/unwind"
)

// FrameSymbol names an expected frame in a snapshot's sidecar, so the
// replay test can check names without the binary.
type FrameSymbol struct {
	PC    uint64 `json:"pc"`
	Name  string `json:"name"`
	Start uint64 `json:"start"`
	Size  uint64 `json:"size"`
}

// Sidecar is testdata/cross/NAME.symbols.json.
type Sidecar struct {
	Fixture string        `json:"fixture"`
	Thread  string        `json:"thread"`
	Chain   []string      `json:"chain"`
	Method  string        `json:"method"`
	Frames  []FrameSymbol `json:"frames"`
}

func emitSnapshot(t *target, s ptrace.Sample, st unwind.Stack, stack unwind.StackBounds, pac uint64, thread string) error {
	snap := unwind.Snapshot{
		Comment: fmt.Sprintf("%s thread %q, captured live by emu/capture under full-system emulation", t.name, thread),
		Regs:    s.Regs,
		Stack:   stack,
		PACMask: pac,
		Modules: t.snap,
		Expect:  &unwind.SnapshotExpect{Complete: st.Complete},
	}
	var hi uint64
	for _, f := range st.Frames {
		snap.Expect.PCs = append(snap.Expect.PCs, f.PC)
		snap.Expect.Methods = append(snap.Expect.Methods, f.Method.String())
		hi = max(hi, f.SP)
	}
	// Keep the window small: up to 1 KiB above the outermost frame's SP,
	// if the replay of the trimmed window gives the same walk.
	snap.Window = unwind.SnapshotWindow{Base: s.StackAddr, Bytes: s.Stack}
	if n := hi + 1024 - s.StackAddr; hi >= s.StackAddr && n < uint64(len(s.Stack)) {
		trimmed := snap
		trimmed.Window.Bytes = s.Stack[:n]
		if r, err := trimmed.Walk(Options(s.Regs.Arch, t.mods, unwind.StackBounds{}, 0)); err == nil && trimmed.Check(r) == nil {
			snap = trimmed
		}
	}
	var side Sidecar
	side.Fixture, side.Thread, side.Method = t.name, thread, callerMethod(t.name).String()
	for _, e := range spinThreads {
		if e.comm == thread {
			side.Chain = e.chain
		}
	}
	for i, f := range st.Frames {
		pc := f.PC
		if i > 0 {
			pc--
		}
		if sym, ok := t.symbolize(pc); ok {
			side.Frames = append(side.Frames, FrameSymbol{PC: f.PC, Name: sym.Name, Start: sym.Value, Size: sym.Size})
		}
	}
	base := fmt.Sprintf("%s-%s", strings.TrimPrefix(t.name, "spin-"), thread)
	var b bytes.Buffer
	if _, err := snap.WriteTo(&b); err != nil {
		return err
	}
	emit(base+".snapshot.json", b.Bytes())
	js, err := json.MarshalIndent(side, "", "\t")
	if err != nil {
		return err
	}
	emit(base+".symbols.json", append(js, '\n'))
	return nil
}

// emit prints a file as gzip+base64 between markers on the console.
func emit(name string, data []byte) {
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	w.Write(data)
	w.Close()
	enc := base64.StdEncoding.EncodeToString(z.Bytes())
	fmt.Printf("CAPTURE-BEGIN %s\n", name)
	for len(enc) > 0 {
		n := min(len(enc), 76)
		fmt.Println(enc[:n])
		enc = enc[n:]
	}
	fmt.Printf("CAPTURE-END %s\n", name)
}
