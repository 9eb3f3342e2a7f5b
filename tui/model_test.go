package tui

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"codeberg.org/stacktop/stacktop/profile"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	pid  = 4242
	exe  = "/usr/bin/app"
	libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
)

// stack builds leaf-first frames from a caller-first list "main;a;hot".
func stack(callers string) []profile.Frame {
	names := strings.Split(callers, ";")
	fs := make([]profile.Frame, len(names))
	for i, n := range names {
		mod := exe
		if strings.HasPrefix(n, "libc_") {
			mod = libc
		}
		fs[len(names)-1-i] = profile.Frame{PC: uint64(0x1000 + 0x10*i + len(n)), Function: n, Module: mod}
	}
	return fs
}

type spec struct {
	tid    int
	name   string
	stack  string
	at     time.Duration // first sample time
	n      int
	period time.Duration
}

func build(specs ...spec) *profile.Profile {
	p := profile.New(pid, exe+" --serve", t0, 10*time.Millisecond)
	for _, s := range specs {
		for i := range s.n {
			p.Add(profile.Sample{
				TID: s.tid, ThreadName: s.name,
				Time:   t0.Add(s.at + time.Duration(i)*s.period),
				Frames: stack(s.stack),
			})
		}
	}
	return p
}

// hotCold: 75% main;a;hot on the main thread, 25% main;b;cold on a worker,
// interleaved over one second.
func hotCold() *profile.Profile {
	p := profile.New(pid, exe+" --serve", t0, 10*time.Millisecond)
	for i := range 100 {
		s := profile.Sample{TID: pid, ThreadName: "app", Time: t0.Add(time.Duration(i) * 10 * time.Millisecond), Frames: stack("main;a;hot")}
		if i%4 == 3 {
			s.TID, s.ThreadName, s.Frames = pid+1, "worker", stack("main;b;cold")
		}
		p.Add(s)
	}
	return p
}

func status(p *profile.Profile) Status {
	return Status{Profile: p.Snapshot(), Rate: 99.5, Threads: len(p.Threads),
		Pause: PauseStats{Median: 42 * time.Microsecond, P99: 180 * time.Microsecond, Max: 2 * time.Millisecond}}
}

func newTestModel(t *testing.T, opt Options) model {
	t.Helper()
	t.Setenv("NO_COLOR", "")
	return newModel(nil, opt, termenv.ANSI256)
}

func update(t *testing.T, m model, msgs ...tea.Msg) model {
	t.Helper()
	for _, msg := range msgs {
		nm, _ := m.Update(msg)
		m = nm.(model)
	}
	if m.crash.failed() {
		t.Fatalf("model panicked: %v\n%s", m.crash.err.Value, m.crash.err.Stack)
	}
	return m
}

func poll(st Status, sec int) statusMsg {
	return statusMsg{now: t0.Add(time.Duration(sec) * time.Second), status: st}
}

func keys(s string) tea.KeyMsg {
	switch s {
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func typeText(s string) []tea.Msg {
	var out []tea.Msg
	for _, r := range s {
		out = append(out, keys(string(r)))
	}
	return out
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// screen is View with colours stripped, one string per line.
func screen(t *testing.T, m model) []string {
	t.Helper()
	v := m.View()
	lines := strings.Split(ansiRE.ReplaceAllString(v, ""), "\n")
	if strings.Contains(strings.Join(lines, ""), "\x1b") {
		t.Fatalf("escape left after stripping: %q", v)
	}
	return lines
}

// rowOf finds the body line whose name column is exactly name (followed by
// the module or the end of line) and returns its fields.
func rowOf(lines []string, name string) (int, []string) {
	for i, l := range lines[headerLines:] {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), ">"))
		for j, w := range f {
			if w == name && j >= 2 {
				return headerLines + i, f
			}
		}
	}
	return -1, nil
}

func dump(lines []string) string { return "\n" + strings.Join(lines, "\n") }

func TestFunctionsView(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1))
	lines := screen(t, m)
	want := map[string][2]string{ // self, total
		"hot":  {"75.0%", "75.0%"},
		"cold": {"25.0%", "25.0%"},
		"main": {"0.0%", "100.0%"},
		"a":    {"0.0%", "75.0%"},
		"b":    {"0.0%", "25.0%"},
	}
	for name, w := range want {
		i, f := rowOf(lines, name)
		if i < 0 {
			t.Fatalf("no row for %s:%s", name, dump(lines))
		}
		if f[0] != w[0] || f[1] != w[1] {
			t.Errorf("%s: self %s total %s, want %s %s", name, f[0], f[1], w[0], w[1])
		}
		if !strings.Contains(lines[i], "app") {
			t.Errorf("%s: module not shown: %q", name, lines[i])
		}
	}
	// Sorted by self by default, as perf top and py-spy top do: the rows
	// are where the time goes, not main and start_thread first.
	if !strings.Contains(strings.Join(lines[:headerLines+1], "\n"), "▼SELF%") {
		t.Errorf("sort column not marked as self:%s", dump(lines))
	}
	if i, _ := rowOf(lines, "hot"); i != headerLines+1 {
		t.Errorf("by self, hot is on line %d, want first row:%s", i, dump(lines))
	}
	for _, l := range lines[:3] {
		_ = l
	}
	head := strings.Join(lines[:headerLines], "\n")
	for _, w := range []string{"pid 4242", "/usr/bin/app --serve", "threads 2", "99.5 Hz", "100 samples", "med 42µs", "p99 180µs", "window last 5s"} {
		if !strings.Contains(head, w) {
			t.Errorf("header lacks %q:%s", w, dump(lines))
		}
	}
}

func TestSortSwitch(t *testing.T) {
	m := update(t, newTestModel(t, Options{SortByTotal: true}), poll(status(hotCold()), 1))
	lines := screen(t, m)
	if !strings.Contains(lines[headerLines], "▼TOTAL%") {
		t.Errorf("SortByTotal: column header %q", lines[headerLines])
	}
	if i, _ := rowOf(lines, "main"); i != headerLines+1 {
		t.Errorf("by total, main on line %d, want first:%s", i, dump(lines))
	}
	m = update(t, m, keys("s"))
	lines = screen(t, m)
	if !strings.Contains(lines[headerLines], "▼SELF%") || strings.Contains(lines[headerLines], "▼TOTAL%") {
		t.Errorf("column header after s: %q", lines[headerLines])
	}
	if i, _ := rowOf(lines, "hot"); i != headerLines+1 {
		t.Errorf("by self, hot on line %d, want first:%s", i, dump(lines))
	}
	if i, _ := rowOf(lines, "cold"); i != headerLines+2 {
		t.Errorf("by self, cold on line %d, want second:%s", i, dump(lines))
	}
	// Sorting survives a refresh, and t switches back.
	m = update(t, m, poll(status(hotCold()), 2))
	if i, _ := rowOf(screen(t, m), "hot"); i != headerLines+1 {
		t.Errorf("sort by self lost on refresh")
	}
	m = update(t, m, keys("t"))
	if i, _ := rowOf(screen(t, m), "main"); i != headerLines+1 {
		t.Errorf("t did not sort by total again:%s", dump(screen(t, m)))
	}
}

// treeLine finds a tree row by name and returns its text and depth (the
// column where the marker + name begin).
func treeLine(lines []string, name string) (string, bool) {
	for _, l := range lines[headerLines+1:] {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), ">"))
		if len(f) >= 3 && (f[len(f)-2] == name || f[len(f)-1] == name) {
			return l, true
		}
	}
	return "", false
}

func TestTreeView(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1), keys("2"))
	lines := screen(t, m)
	body := lines[headerLines+1:]
	// main > a > hot open by default, b folded so cold is hidden.
	wantOrder := []struct{ mark, name, total, self string }{
		{"▾", "main", "100.0%", "0.0%"},
		{"▾", "a", "75.0%", "0.0%"},
		{"", "hot", "75.0%", "75.0%"},
		{"▸", "b", "25.0%", "0.0%"},
	}
	for i, w := range wantOrder {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(body[i]), ">"))
		got := strings.Join(f, " ")
		want := strings.Join(strings.Fields(fmt.Sprintf("%s %s %s %s app", w.total, w.self, w.mark, w.name)), " ")
		if got != want {
			t.Errorf("tree row %d = %q, want %q:%s", i, got, want, dump(lines))
		}
	}
	if _, ok := treeLine(lines, "cold"); ok {
		t.Errorf("cold shown although b is folded:%s", dump(lines))
	}
	// Indentation grows with depth.
	col := func(l, sub string) int { return ansi.StringWidth(l[:strings.Index(l, sub)]) }
	if col(body[2], "hot") <= col(body[1], "a ") || col(body[1], "a ") <= col(body[0], "main") {
		t.Errorf("hot not indented under a:%s", dump(lines))
	}

	// down to a, left folds it: hot disappears.
	m = update(t, m, keys("down"), keys("left"))
	lines = screen(t, m)
	if _, ok := treeLine(lines, "hot"); ok {
		t.Errorf("hot still shown after folding a:%s", dump(lines))
	}
	if l, _ := treeLine(lines, "a"); !strings.HasPrefix(l, ">") || !strings.Contains(l, "▸") {
		t.Errorf("a not selected and folded: %q", l)
	}
	// The fold state survives a refresh with a new snapshot.
	m = update(t, m, poll(status(hotCold()), 2))
	if _, ok := treeLine(screen(t, m), "hot"); ok {
		t.Errorf("fold lost on refresh:%s", dump(screen(t, m)))
	}
	// left on a folded node goes to its parent; then down twice to b and
	// right opens it.
	m = update(t, m, keys("left"))
	if l, _ := treeLine(screen(t, m), "main"); !strings.HasPrefix(l, ">") {
		t.Errorf("left on folded a did not select main: %q", l)
	}
	m = update(t, m, keys("down"), keys("down"), keys("right"))
	lines = screen(t, m)
	if _, ok := treeLine(lines, "cold"); !ok {
		t.Errorf("right on b did not show cold:%s", dump(lines))
	}
	// enter toggles.
	m = update(t, m, keys("enter"))
	if _, ok := treeLine(screen(t, m), "cold"); ok {
		t.Errorf("enter on open b did not fold it")
	}
}

func TestThreadsView(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1), keys("3"))
	lines := screen(t, m)
	check := func(tid int, name, share, stack string) {
		t.Helper()
		for _, l := range lines[headerLines+1:] {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), ">"))
			if len(f) > 3 && f[1] == fmt.Sprint(tid) {
				if f[0] != share || f[2] != name || !strings.Contains(l, stack) {
					t.Errorf("thread %d row %q, want share %s name %s stack %q", tid, l, share, name, stack)
				}
				return
			}
		}
		t.Errorf("thread %d missing:%s", tid, dump(lines))
	}
	check(pid, "app", "75.0%", "hot < a < main")
	check(pid+1, "worker", "25.0%", "cold < b < main")
}

func TestThreadStackDepth(t *testing.T) {
	p := build(spec{tid: 7, name: "deep", stack: "main;f1;f2;f3;f4;f5;leaf", n: 3, period: time.Millisecond})
	m := update(t, newTestModel(t, Options{StackFrames: 2}), poll(status(p), 1), keys("3"))
	v := strings.Join(screen(t, m), "\n")
	if !strings.Contains(v, "leaf < f5 < … 5 more") {
		t.Errorf("stack not cut at 2 frames:%s", v)
	}
}

func TestWindowToggle(t *testing.T) {
	// old runs in the first second, new in the last; the 5s window sees
	// only new, cumulative sees both.
	p := build(
		spec{tid: 1, stack: "main;old", n: 50, period: 20 * time.Millisecond},
		spec{tid: 1, stack: "main;new", at: 20 * time.Second, n: 50, period: 20 * time.Millisecond},
	)
	m := update(t, newTestModel(t, Options{}), poll(status(p), 21))
	lines := screen(t, m)
	if !strings.Contains(lines[2], "window last 5s: 50 samples") {
		t.Errorf("window header: %q", lines[2])
	}
	if i, _ := rowOf(lines, "old"); i >= 0 {
		t.Errorf("old shown in 5s window:%s", dump(lines))
	}
	if _, f := rowOf(lines, "new"); f == nil || f[0] != "100.0%" {
		t.Errorf("new in window: %v", f)
	}
	m = update(t, m, keys("w"))
	lines = screen(t, m)
	if !strings.Contains(lines[2], "cumulative: 100 samples") || strings.Contains(lines[2], "window last") {
		t.Errorf("cumulative header: %q", lines[2])
	}
	if _, f := rowOf(lines, "old"); f == nil || f[0] != "50.0%" {
		t.Errorf("old cumulative: %v:%s", f, dump(lines))
	}
	// Configured window length.
	m = update(t, newTestModel(t, Options{Window: 30 * time.Second}), poll(status(p), 21))
	if l := screen(t, m)[2]; !strings.Contains(l, "window last 30s: 100 samples") {
		t.Errorf("30s window header: %q", l)
	}
	// Starting cumulative.
	m = update(t, newTestModel(t, Options{Cumulative: true}), poll(status(p), 21))
	if l := screen(t, m)[2]; !strings.Contains(l, "cumulative") {
		t.Errorf("Cumulative option ignored: %q", l)
	}
}

func TestFilter(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1), keys("/"))
	m = update(t, m, typeText("COLX")...)
	m = update(t, m, keys("backspace"), keys("d"))
	if l := screen(t, m)[3]; !strings.Contains(l, "filter: COLd") {
		t.Errorf("filter line while typing: %q", l)
	}
	// Typing does not filter yet; enter does.
	if i, _ := rowOf(screen(t, m), "hot"); i < 0 {
		t.Errorf("filter applied before enter")
	}
	m = update(t, m, keys("enter"))
	lines := screen(t, m)
	if i, _ := rowOf(lines, "hot"); i >= 0 {
		t.Errorf("hot shown with filter cold:%s", dump(lines))
	}
	if _, f := rowOf(lines, "cold"); f == nil || f[0] != "25.0%" {
		t.Errorf("cold row with filter: %v:%s", f, dump(lines))
	}
	if !strings.Contains(lines[3], `filter "COLd" 25.0% of window`) {
		t.Errorf("filter notice: %q", lines[3])
	}
	// Keys typed while not editing are commands again.
	m = update(t, m, keys("2"))
	lines = screen(t, m)
	if _, ok := treeLine(lines, "hot"); ok {
		t.Errorf("tree shows hot with filter cold:%s", dump(lines))
	}
	if _, ok := treeLine(lines, "a"); ok {
		t.Errorf("tree shows a with filter cold:%s", dump(lines))
	}
	m = update(t, m, keys("3"))
	lines = screen(t, m)
	if strings.Contains(strings.Join(lines, "\n"), " app ") {
		t.Errorf("threads view shows the hot-only thread:%s", dump(lines))
	}
	// A module substring matches every function of it.
	m = update(t, m, keys("1"), keys("/"), keys("esc"), keys("/"))
	m = update(t, m, append(typeText("libc"), keys("enter"))...)
	lines = screen(t, m)
	if i, _ := rowOf(lines, "main"); i >= 0 {
		t.Errorf("filter libc matched main:%s", dump(lines))
	}
	if !strings.Contains(strings.Join(lines, "\n"), `nothing matches the filter "libc"`) {
		t.Errorf("no empty-filter notice:%s", dump(lines))
	}
	// esc clears.
	m = update(t, m, keys("esc"))
	if i, _ := rowOf(screen(t, m), "hot"); i < 0 {
		t.Errorf("esc did not clear the filter:%s", dump(screen(t, m)))
	}
}

func TestPause(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1), keys(" "))
	other := build(spec{tid: 9, stack: "main;other", n: 10, period: time.Millisecond})
	m = update(t, m, poll(status(other), 2))
	lines := screen(t, m)
	if i, _ := rowOf(lines, "hot"); i < 0 {
		t.Errorf("paused view lost hot:%s", dump(lines))
	}
	if i, _ := rowOf(lines, "other"); i >= 0 {
		t.Errorf("paused view shows new data:%s", dump(lines))
	}
	if !strings.Contains(lines[3], "PAUSED") {
		t.Errorf("no PAUSED notice: %q", lines[3])
	}
	m = update(t, m, keys("p"))
	lines = screen(t, m)
	if i, _ := rowOf(lines, "other"); i < 0 {
		t.Errorf("unpause did not show the newest data:%s", dump(lines))
	}
}

func TestReset(t *testing.T) {
	p := hotCold()
	m := update(t, newTestModel(t, Options{Cumulative: true}), poll(status(p), 1), keys("r"))
	lines := screen(t, m)
	if !strings.Contains(lines[2], "cumulative since reset: 0 samples") {
		t.Errorf("after reset: %q", lines[2])
	}
	if i, _ := rowOf(lines, "hot"); i >= 0 {
		t.Errorf("hot shown after reset:%s", dump(lines))
	}
	for i := range 5 {
		p.Add(profile.Sample{TID: 3, Time: t0.Add(2*time.Second + time.Duration(i)*time.Millisecond), Frames: stack("main;fresh")})
	}
	m = update(t, m, poll(status(p), 3))
	lines = screen(t, m)
	if _, f := rowOf(lines, "fresh"); f == nil || f[0] != "100.0%" {
		t.Errorf("after reset and new samples: %v:%s", f, dump(lines))
	}
}

func TestExited(t *testing.T) {
	st := status(hotCold())
	m := update(t, newTestModel(t, Options{}), poll(st, 1))
	st.Exited, st.ExitMsg = true, "exit status 3"
	st.Err = errors.New("ptrace: no such process")
	m = update(t, m, poll(st, 2))
	lines := screen(t, m)
	if !strings.Contains(lines[3], "target exited: exit status 3") || !strings.Contains(lines[3], "ptrace: no such process") {
		t.Errorf("exit notice: %q", lines[3])
	}
	if i, _ := rowOf(lines, "hot"); i < 0 {
		t.Errorf("last data gone after exit:%s", dump(lines))
	}
	// Still shown after a later poll, and q quits.
	m = update(t, m, poll(st, 60))
	if i, _ := rowOf(screen(t, m), "hot"); i < 0 {
		t.Errorf("data gone a minute after exit")
	}
	if _, cmd := m.Update(keys("q")); cmd == nil || cmd() != tea.Quit() {
		t.Errorf("q does not quit")
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlC}); cmd == nil || cmd() != tea.Quit() {
		t.Errorf("ctrl+c does not quit")
	}
}

// wide has long names, a long command line and many threads.
func wide() *profile.Profile {
	long := strings.Repeat("very::long::namespace::", 12) + "function<with, templates>(int, char const*)"
	p := build(
		spec{tid: 1, name: "a-thread-name-longer-than-the-column", stack: "main;" + long + ";libc_read", n: 40, period: time.Millisecond},
		spec{tid: 2, name: "日本語スレッド名", stack: "main;関数;" + long, n: 30, period: time.Millisecond},
	)
	for i := range 40 {
		p.Add(profile.Sample{TID: 100 + i, Time: t0.Add(time.Duration(i) * time.Millisecond),
			Frames: stack(fmt.Sprintf("main;worker%d;%s;d1;d2;d3;d4;d5;d6;d7;d8;d9;d10;d11;d12;d13;d14;d15;d16;d17;d18;d19;d20;d21;d22;d23;d24;d25;d26;d27;d28;d29;d30;d31;d32;d33;d34", i, long))})
	}
	p.Command = strings.Repeat("/opt/some/very/long/path/", 8) + "server --with --many --arguments"
	return p
}

func TestFitsTerminal(t *testing.T) {
	st := status(wide())
	st.Err = errors.New(strings.Repeat("an error message that goes on ", 10))
	st.Exited, st.ExitMsg = true, "killed by signal SIGKILL"
	sizes := []tea.WindowSizeMsg{{Width: 80, Height: 24}, {Width: 120, Height: 40}, {Width: 40, Height: 12}, {Width: 20, Height: 8}}
	screens := map[string][]tea.Msg{
		"functions": {keys("1")},
		"tree":      {keys("2"), keys("right"), keys("down"), keys("right"), keys("down"), keys("right"), keys("down"), keys("right")},
		"tree-deep": {keys("2"), keys("G"), keys("right"), keys("right"), keys("right"), keys("right"), keys("right"), keys("right"), keys("right"), keys("right")},
		"threads":   {keys("3")},
		"help":      {keys("?")},
		"filtering": {keys("/"), keys("x")},
		"paused":    {keys(" "), keys("G")},
	}
	for _, size := range sizes {
		for name, msgs := range screens {
			m := update(t, newTestModel(t, Options{}), size, poll(st, 1))
			m = update(t, m, msgs...)
			for _, deep := range []bool{false, true} {
				if deep { // every tree node open
					for range 40 {
						m = update(t, m, keys("right"))
					}
				}
				v := m.View()
				lines := strings.Split(v, "\n")
				if len(lines) != size.Height {
					t.Errorf("%s %dx%d: %d lines, want %d", name, size.Width, size.Height, len(lines), size.Height)
				}
				for i, l := range lines {
					if w := ansi.StringWidth(l); w > size.Width {
						t.Errorf("%s %dx%d: line %d is %d wide: %q", name, size.Width, size.Height, i, w, ansiRE.ReplaceAllString(l, ""))
					}
				}
			}
		}
	}
}

// TestRowsFillHeight: with enough rows, the list uses every line between
// the header and the key line, and a resize changes how many.
func TestRowsFillHeight(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(wide()), 1), keys("3"))
	for _, h := range []int{24, 30} {
		m = update(t, m, tea.WindowSizeMsg{Width: 80, Height: h})
		lines := screen(t, m)
		rows := 0
		for _, l := range lines[headerLines+1 : h-footerLines] {
			if strings.Contains(l, "%") {
				rows++
			}
		}
		if want := h - headerLines - footerLines - 1; rows != want {
			t.Errorf("height %d: %d thread rows, want %d:%s", h, rows, want, dump(lines))
		}
		if !strings.Contains(lines[h-1], "quit") {
			t.Errorf("height %d: key line missing: %q", h, lines[h-1])
		}
	}
	// Scrolling: End selects the last thread and shows it.
	m = update(t, m, keys("G"))
	lines := screen(t, m)
	if !strings.HasPrefix(lines[len(lines)-2], ">") {
		t.Errorf("End does not select the last visible row:%s", dump(lines))
	}
}

func TestNoColor(t *testing.T) {
	run := func() string {
		m := newModel(nil, Options{}, termenv.ANSI256)
		m = update(t, m, poll(status(hotCold()), 1))
		var all []string
		for _, k := range []string{"1", "2", "3", "?"} {
			m = update(t, m, keys(k))
			all = append(all, m.View())
		}
		return strings.Join(all, "\n")
	}
	t.Setenv("NO_COLOR", "")
	if v := run(); !strings.Contains(v, "\x1b[") {
		t.Fatalf("the control case has no escapes; the NO_COLOR check would prove nothing")
	}
	t.Setenv("NO_COLOR", "1")
	if v := run(); strings.Contains(v, "\x1b") {
		t.Errorf("escape sequence with NO_COLOR: %q", v)
	}
	t.Setenv("NO_COLOR", "")
	m := update(t, newModel(nil, Options{NoColor: true}, termenv.TrueColor), poll(status(hotCold()), 1))
	if v := m.View(); strings.Contains(v, "\x1b") {
		t.Errorf("escape sequence with Options.NoColor: %q", v)
	}
	// Without colour the cursor is still visible.
	if l := screen(t, m)[headerLines+1]; !strings.HasPrefix(l, ">") {
		t.Errorf("no cursor mark without colour: %q", l)
	}
}

func TestHelpAndViews(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1))
	if l := screen(t, m)[23]; !strings.Contains(l, "q quit") || !strings.Contains(l, "? help") {
		t.Errorf("key line: %q", l)
	}
	m = update(t, m, keys("?"))
	v := strings.Join(screen(t, m), "\n")
	for _, w := range []string{"sort by self", "collapse", "window/cumulative", "clear filter"} {
		if !strings.Contains(v, w) {
			t.Errorf("full help lacks %q:%s", w, v)
		}
	}
	m = update(t, m, keys("?"))
	for i, want := range []string{"CALLER > CALLEE", "SHARE%", "FUNCTION"} {
		m = update(t, m, keys("tab"))
		if l := screen(t, m)[headerLines]; !strings.Contains(l, want) {
			t.Errorf("tab %d: column header %q lacks %q", i+1, l, want)
		}
	}
}

func TestWaitingAndEmpty(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(Status{}, 0))
	if v := strings.Join(screen(t, m), "\n"); !strings.Contains(v, "waiting for samples") {
		t.Errorf("no waiting notice:%s", v)
	}
	// Keys on empty lists do nothing harmful.
	for _, k := range []string{"2", "down", "right", "left", "enter", "G", "3", "up", "r", "w", "s"} {
		m = update(t, m, keys(k))
	}
	_ = m.View()
}

func TestPanicInUpdateIsRecorded(t *testing.T) {
	m := newTestModel(t, Options{})
	m.data.funcs = nil
	m.treeRows = []treeRow{{node: nil}} // corrupt on purpose: fold dereferences node
	m.view = viewTree
	_, cmd := m.Update(keys("right"))
	if !m.crash.failed() {
		t.Fatal("panic not recorded")
	}
	if cmd == nil || cmd() != tea.Quit() {
		t.Errorf("panic did not quit")
	}
	if e := m.crash.panicErr(); !strings.Contains(e.Error(), "nil pointer") || len(e.Stack) == 0 {
		t.Errorf("panic error %v, stack %d bytes", e, len(e.Stack))
	}
}

func TestSourcePanicIsRecorded(t *testing.T) {
	m := newModel(sourceFunc(func() Status { panic("source broke") }), Options{}, termenv.Ascii)
	msg := m.Init()()
	if _, ok := msg.(crashMsg); !ok {
		t.Fatalf("poll returned %T, want crashMsg", msg)
	}
	if _, cmd := m.Update(msg); cmd == nil || cmd() != tea.Quit() {
		t.Errorf("crashMsg did not quit")
	}
	if e := m.crash.panicErr(); e == nil || e.Value != "source broke" {
		t.Errorf("panic error %v", e)
	}
}

func TestFilterByModule(t *testing.T) {
	p := build(spec{tid: 1, stack: "main;libc_read", n: 10, period: time.Millisecond})
	m := update(t, newTestModel(t, Options{}), poll(status(p), 1), keys("/"))
	m = update(t, m, append(typeText("X86_64"), keys("enter"))...)
	lines := screen(t, m)
	if i, _ := rowOf(lines, "main"); i >= 0 {
		t.Errorf("module filter kept main:%s", dump(lines))
	}
	if _, f := rowOf(lines, "libc_read"); f == nil || f[0] != "100.0%" {
		t.Errorf("module filter lost libc_read: %v:%s", f, dump(lines))
	}
}

func TestThreadColumnsAlignWithWideNames(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(wide()), 1), keys("3"))
	lines := screen(t, m)
	l1, _ := rowOfTID(lines, 1)
	l2, _ := rowOfTID(lines, 2)
	c1 := ansi.StringWidth(l1[:strings.Index(l1, "libc_read")])
	c2 := ansi.StringWidth(l2[:strings.Index(l2, "very::")])
	if c1 != c2 {
		t.Errorf("stack column at %d and %d:%s", c1, c2, dump(lines))
	}
}

func rowOfTID(lines []string, tid int) (string, bool) {
	for _, l := range lines[headerLines+1:] {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), ">"))
		if len(f) > 2 && f[1] == fmt.Sprint(tid) {
			return l, true
		}
	}
	return "", false
}

// BenchmarkRefresh is one refresh of a busy target: a new snapshot of a
// profile with 200k events over 2000 distinct stacks, aggregated in the
// 5s window and the cumulative mode, then drawn.
func BenchmarkRefresh(b *testing.B) {
	p := profile.New(pid, exe, t0, time.Millisecond)
	var stacks [][]profile.Frame
	for i := range 2000 {
		stacks = append(stacks, stack(fmt.Sprintf("main;loop%d;work%d;inner%d;leaf%d", i%7, i%31, i%113, i)))
	}
	for i := range 200_000 {
		p.Add(profile.Sample{TID: 100 + i%16, Time: t0.Add(time.Duration(i) * 100 * time.Microsecond), Frames: stacks[(i*7919)%len(stacks)]})
	}
	for _, mode := range []struct {
		name string
		opt  Options
	}{{"window5s", Options{}}, {"cumulative", Options{Cumulative: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			m := newModel(nil, mode.opt, termenv.ANSI256)
			st := status(p)
			b.ReportAllocs()
			for b.Loop() {
				m = m.receive(poll(st, 1))
				_ = m.View()
			}
		})
	}
}

// TestThreadStacks: Enter on a thread shows the call tree of its samples
// only, shares of that thread; esc goes back to the threads.
func TestThreadStacks(t *testing.T) {
	m := update(t, newTestModel(t, Options{}), poll(status(hotCold()), 1), keys("3"))
	lines := screen(t, m)
	// The worker (25%) is the second row; select it.
	i, _ := rowOf(lines, "worker")
	if i != headerLines+2 {
		t.Fatalf("worker on line %d, want second:%s", i, dump(lines))
	}
	m = update(t, m, keys("down"), keys("enter"))
	lines = screen(t, m)
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "CALLER > CALLEE") || !strings.Contains(all, "stacks of thread 4243 worker") {
		t.Fatalf("enter on the worker did not show its stacks:%s", dump(lines))
	}
	if _, f := rowOf(lines, "cold"); f == nil || f[0] != "100.0%" {
		t.Errorf("the worker's cold row %v, want 100.0%% of its samples:%s", f, dump(lines))
	}
	if i, _ := rowOf(lines, "hot"); i >= 0 {
		t.Errorf("the main thread's hot shown in the worker's stacks:%s", dump(lines))
	}
	// The functions view follows the focus too.
	m = update(t, m, keys("1"))
	if i, _ := rowOf(screen(t, m), "hot"); i >= 0 {
		t.Errorf("functions view shows hot while the worker is in focus")
	}
	m = update(t, m, keys("esc"))
	lines = screen(t, m)
	if strings.Contains(strings.Join(lines, "\n"), "stacks of thread") || !strings.Contains(strings.Join(lines, "\n"), "LATEST STACK") {
		t.Errorf("esc did not return to all threads:%s", dump(lines))
	}
	if _, f := rowOf(lines, "worker"); f == nil || f[0] != "25.0%" {
		t.Errorf("worker share after esc %v, want 25.0%%", f)
	}
}

// TestHeaderModeAndRate: the header names the mode and the rate asked
// next to the achieved one.
func TestHeaderModeAndRate(t *testing.T) {
	p := hotCold()
	p.Wall = true
	m := update(t, newTestModel(t, Options{RateAsked: 99}), poll(status(p), 1))
	head := strings.Join(screen(t, m)[:headerLines], "\n")
	for _, w := range []string{"wall-clock", "99.5 of 99 Hz"} {
		if !strings.Contains(head, w) {
			t.Errorf("header lacks %q:%s", w, head)
		}
	}
}

// TestPerfHeader: a back end that stops no thread shows no pause figures,
// and samples the kernel lost are counted once, as lost, not also as
// missed (the profile's Missed includes them).
func TestPerfHeader(t *testing.T) {
	p := hotCold()
	p.Missed = 7
	st := status(p)
	st.Lost = 5
	m := newTestModel(t, Options{NoStops: true, RateAsked: 999})
	m = update(t, m, tea.WindowSizeMsg{Width: 120, Height: 30}, poll(st, 1))
	head := strings.Join(screen(t, m)[:headerLines], "\n")
	for _, want := range []string{"perf 999 Hz of CPU", "no thread stopped", "lost 5", "missed 2"} {
		if !strings.Contains(head, want) {
			t.Errorf("header lacks %q:%s", want, head)
		}
	}
	if strings.Contains(head, "pause/sample") {
		t.Errorf("header shows pause figures for a back end that stops no thread:%s", head)
	}
}

// TestHeaderNotes: what the stacks lack (the engine's notes: perf without
// kernel time, a Go program without DWARF) is in the header, as record's
// summary says it.
func TestHeaderNotes(t *testing.T) {
	st := status(hotCold())
	st.Notes = []string{"perf: user-mode samples only"}
	m := update(t, newTestModel(t, Options{}), tea.WindowSizeMsg{Width: 120, Height: 30}, poll(st, 1))
	head := strings.Join(screen(t, m)[:headerLines], "\n")
	if !strings.Contains(head, "note: perf: user-mode samples only") {
		t.Errorf("header lacks the note:%s", head)
	}
}

// TestFewSamplesWarning: a window of a few samples says how little its
// shares mean; a window of enough samples does not.
func TestFewSamplesWarning(t *testing.T) {
	few := build(spec{tid: pid, name: "app", stack: "main;a;hot", n: 2, period: 10 * time.Millisecond})
	m := update(t, newTestModel(t, Options{}), tea.WindowSizeMsg{Width: 120, Height: 30}, poll(status(few), 1))
	head := strings.Join(screen(t, m)[:headerLines], "\n")
	if !strings.Contains(head, "only 2 samples in view: shares are ±71 points") {
		t.Errorf("a 2-sample window without a warning:%s", head)
	}
	m = update(t, newTestModel(t, Options{}), tea.WindowSizeMsg{Width: 120, Height: 30}, poll(status(hotCold()), 1))
	if head := strings.Join(screen(t, m)[:headerLines], "\n"); strings.Contains(head, "samples in view") {
		t.Errorf("a 100-sample window warned:%s", head)
	}
}
