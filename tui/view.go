package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"codeberg.org/stacktop/stacktop/profile"
)

// styles are made from the model's own renderer, so the colour profile
// (or NO_COLOR) is a property of the model, not of the process.
type styles struct {
	plain, bold, dim, title, key lipgloss.Style
	colHead, sortCol, selected   lipgloss.Style
	tab, tabActive               lipgloss.Style
	warn, bad, hot               lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	s := r.NewStyle()
	return styles{
		plain:     s,
		bold:      s.Bold(true),
		dim:       s.Foreground(lipgloss.Color("245")),
		title:     s.Bold(true).Foreground(lipgloss.Color("6")),
		key:       s.Bold(true).Foreground(lipgloss.Color("6")),
		colHead:   s.Bold(true).Underline(true),
		sortCol:   s.Bold(true).Underline(true).Foreground(lipgloss.Color("3")),
		selected:  s.Reverse(true),
		tab:       s.Foreground(lipgloss.Color("245")),
		tabActive: s.Bold(true).Reverse(true),
		warn:      s.Bold(true).Foreground(lipgloss.Color("3")),
		bad:       s.Bold(true).Foreground(lipgloss.Color("1")),
		hot:       s.Foreground(lipgloss.Color("1")),
	}
}

// headerLines and footerLines frame the body: title, counters, pause and
// window, notices, tabs; then the key line.
const (
	headerLines = 5
	footerLines = 1
)

// bodyHeight is the rows left for the column header and the list.
func (m *model) bodyHeight() int {
	return max(m.height-headerLines-footerLines, 1)
}

// View draws the model: exactly height lines, none wider than width.
func (m model) View() (s string) {
	defer func() {
		if r := recover(); r != nil {
			m.crash.record(r)
			if q := m.crash.quitFunc(); q != nil {
				go q() // View runs on the event loop; Send would wait for it
			}
			s = "stacktop: internal error, quitting"
		}
	}()
	w, h := m.width, m.height
	if w <= 0 || h <= 0 {
		return ""
	}
	lines := m.header()
	body := m.bodyHeight()
	if m.showHelp {
		m.help.Width = w
		lines = append(lines, strings.Split(m.help.FullHelpView(m.keys.FullHelp()), "\n")...)
	} else {
		switch m.view {
		case viewFunctions:
			lines = append(lines, m.functionsView(body)...)
		case viewTree:
			lines = append(lines, m.treeView(body)...)
		case viewThreads:
			lines = append(lines, m.threadsView(body)...)
		}
	}
	foot := headerLines + body
	for len(lines) < foot {
		lines = append(lines, "")
	}
	lines = lines[:min(len(lines), foot)]
	m.help.Width = w
	lines = append(lines, m.help.ShortHelpView(m.keys.ShortHelp()))
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = fit(l, w)
	}
	return strings.Join(lines, "\n")
}

// fit cuts a (possibly styled) line to width columns.
func fit(s string, w int) string {
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// cut truncates plain text to w columns with an ellipsis.
func cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// padRight left-aligns s in w columns (fmt pads runes, not columns).
func padRight(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// padLeft right-aligns s in w columns.
func padLeft(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}

func (m *model) header() []string {
	st := m.style
	s := m.shown
	p := s.Profile
	sep := st.dim.Render(" · ")

	var l0 []string
	l0 = append(l0, st.title.Render("stacktop top"))
	if p != nil {
		l0 = append(l0, "pid "+strconv.Itoa(p.PID))
		if !m.started.IsZero() {
			l0 = append(l0, fmtElapsed(m.shownNow.Sub(m.started)))
		}
		if p.Command != "" {
			l0 = append(l0, cut(p.Command, m.width))
		}
	}

	var l1, l2 []string
	if p == nil {
		l1 = append(l1, "waiting for samples…")
	} else {
		rate := fmt.Sprintf("%.1f Hz", s.Rate)
		switch {
		case m.opt.NoStops:
			rate = fmt.Sprintf("perf %g Hz of CPU", m.opt.RateAsked)
		case m.opt.RateAsked > 0:
			rate = fmt.Sprintf("%.1f of %g Hz", s.Rate, m.opt.RateAsked)
		}
		mode := "on-CPU"
		if p.Wall {
			mode = "wall-clock"
		}
		l1 = append(l1, mode,
			"threads "+strconv.Itoa(s.Threads),
			rate,
			fmt.Sprintf("%d samples", p.Samples),
			countPart(st, "errors", p.Errors, p.Samples),
			countPart(st, "truncated", p.Truncated, p.Samples),
		)
		// The profile's Missed counts lost samples too; the header shows
		// them apart, once each.
		if missed := p.Missed - s.Lost; missed > 0 {
			l1 = append(l1, countPart(st, "missed", missed, p.Samples+missed))
		}
		if s.Lost > 0 {
			l1 = append(l1, countPart(st, "lost", s.Lost, p.Samples+s.Lost))
		}
		if m.opt.NoStops {
			l2 = append(l2, "no thread stopped")
		} else {
			l2 = append(l2, fmt.Sprintf("pause/sample med %s p99 %s max %s",
				fmtDur(s.Pause.Median), fmtDur(s.Pause.P99), fmtDur(s.Pause.Max)))
		}
	}
	l2 = append(l2, st.bold.Render(m.windowLabel()))

	// Notices: what is wrong or unusual, most important first.
	var l3 []string
	switch {
	case m.editing:
		l3 = append(l3, st.key.Render("filter: ")+string(m.input)+"█ "+st.dim.Render("(enter apply, esc clear)"))
	case m.filter != "":
		l3 = append(l3, "filter "+st.key.Render(strconv.Quote(m.filter))+st.dim.Render(
			fmt.Sprintf(" %s of window (esc clears)", pct(m.data.matched, m.data.total))))
	}
	if m.focus != 0 {
		l3 = append(l3, "stacks of thread "+st.key.Render(strconv.Itoa(m.focus)+" "+m.focusName)+st.dim.Render(" (esc: all threads)"))
	}
	if m.latest.Exited {
		msg := "target exited"
		if m.latest.ExitMsg != "" {
			msg += ": " + m.latest.ExitMsg
		}
		l3 = append(l3, st.warn.Render(msg+" (q to quit)"))
	}
	if m.latest.Err != nil {
		l3 = append(l3, st.bad.Render("error: "+m.latest.Err.Error()))
	}
	if m.paused {
		l3 = append(l3, st.warn.Render("PAUSED"))
	}
	if n := m.data.total; n > 0 && n < trustSamples {
		l3 = append(l3, st.warn.Render(fewSamples(n)))
	}
	for _, n := range m.latest.Notes {
		l3 = append(l3, st.dim.Render("note: "+n))
	}

	return []string{
		strings.Join(l0, sep),
		strings.Join(l1, sep),
		strings.Join(l2, sep),
		strings.Join(l3, sep),
		m.tabs(),
	}
}

// trustSamples is the fewest samples in a window whose shares the header
// shows without a warning: with n samples a share is known to about
// ±100/sqrt(n) points (twice its standard error at worst, p = 1/2), ±10
// points at 100; at 2 samples, 100% means little.
const trustSamples = 100

// fewSamples is the warning for a window of n < trustSamples samples.
func fewSamples(n int64) string {
	return fmt.Sprintf("only %d samples in view: shares are ±%.0f points", n, 100/math.Sqrt(float64(n)))
}

func countPart(st styles, what string, n, of int64) string {
	s := fmt.Sprintf("%s %d", what, n)
	if n == 0 {
		return s
	}
	s += " (" + pct(n, of) + ")"
	return st.warn.Render(s)
}

func (m *model) windowLabel() string {
	var s string
	if m.cumulative {
		s = "cumulative"
		if m.since > 0 {
			s += " since reset"
		}
	} else {
		s = "window last " + fmtSeconds(m.opt.Window)
		if m.since > 0 && m.data.from == m.since {
			s += " (since reset)"
		}
	}
	if m.shown.Profile != nil {
		s += fmt.Sprintf(": %d samples", m.data.total)
	}
	return s
}

func (m *model) tabs() string {
	names := [numViews]string{"1 Functions", "2 Call tree", "3 Threads"}
	var parts []string
	for v, n := range names {
		if viewKind(v) == m.view {
			parts = append(parts, m.style.tabActive.Render(" "+n+" "))
		} else {
			parts = append(parts, m.style.tab.Render(" "+n+" "))
		}
	}
	return strings.Join(parts, " ")
}

// Column layout shared by the lists: a cursor gutter (a visible mark even
// without colour), two percentage columns, then the name.
const (
	gutterW = 2
	pctW    = 7
	leftW   = gutterW + pctW + 1 + pctW + 2
)

func (m *model) gutter(selected bool) string {
	if selected {
		return "> "
	}
	return "  "
}

// row styles a whole list line, reversed when selected.
func (m *model) row(selected bool, text string) string {
	if selected {
		return m.style.selected.Render(text)
	}
	return text
}

func (m *model) emptyBody(height int, head string) []string {
	msg := "no samples in this window"
	switch {
	case m.shown.Profile == nil:
		msg = "waiting for samples…"
	case m.data.total > 0 && m.filter != "":
		msg = "nothing matches the filter " + strconv.Quote(m.filter)
	}
	return []string{head, "", "  " + m.style.dim.Render(msg)}
}

func (m *model) functionsView(height int) []string {
	self, total := "SELF%", "TOTAL%"
	selfSt, totalSt := m.style.colHead, m.style.sortCol
	if m.bySelf {
		self, selfSt, totalSt = "▼"+self, m.style.sortCol, m.style.colHead
	} else {
		total = "▼" + total
	}
	head := "  " + selfSt.Render(padLeft(self, pctW)) + " " + totalSt.Render(padLeft(total, pctW)) +
		"  " + m.style.colHead.Render("FUNCTION") + m.style.dim.Render("  (module)")
	if len(m.data.funcs) == 0 {
		return m.emptyBody(height, head)
	}
	out := []string{head}
	rows := height - 1
	v := viewFunctions
	for i := m.top[v]; i < len(m.data.funcs) && i < m.top[v]+rows; i++ {
		f := m.data.funcs[i]
		sel := i == m.cursor[v]
		left := m.gutter(sel) + padLeft(pct(f.Self, m.data.total), pctW) + " " +
			padLeft(pct(f.Total, m.data.total), pctW) + "  "
		out = append(out, m.row(sel, left+m.nameModule(f.Name, f.Module, m.width-leftW, sel)))
	}
	return out
}

// nameModule lays out a function name and its module's base name in w
// columns; the name gets at least two thirds when both do not fit.
func (m *model) nameModule(name, module string, w int, selected bool) string {
	mod := ""
	if module != "" {
		mod = "  " + profile.ModuleBase(module)
	}
	nw, mw := ansi.StringWidth(name), ansi.StringWidth(mod)
	if nw+mw > w {
		mw = min(mw, max(w-nw, w/3))
		nw = w - mw
	}
	name, mod = cut(name, nw), cut(mod, mw)
	if selected || mod == "" {
		return name + mod
	}
	return name + m.style.dim.Render(mod)
}

func (m *model) treeView(height int) []string {
	head := "  " + m.style.colHead.Render(padLeft("TOTAL%", pctW)) + " " +
		m.style.colHead.Render(padLeft("SELF%", pctW)) + "  " +
		m.style.colHead.Render("CALLER > CALLEE") + m.style.dim.Render("  (module)")
	if len(m.treeRows) == 0 {
		return m.emptyBody(height, head)
	}
	out := []string{head}
	v := viewTree
	nameW := m.width - leftW
	maxIndent := max(nameW/2, 0)
	for i := m.top[v]; i < len(m.treeRows) && i < m.top[v]+height-1; i++ {
		r := m.treeRows[i]
		sel := i == m.cursor[v]
		mark := "  "
		switch {
		case r.open:
			mark = "▾ "
		case len(r.node.Children) > 0:
			mark = "▸ "
		}
		indent := min(2*r.depth, maxIndent)
		left := m.gutter(sel) + padLeft(pct(r.node.Total, m.data.total), pctW) + " " +
			padLeft(pct(r.node.Self, m.data.total), pctW) + "  "
		rest := strings.Repeat(" ", indent) + mark
		out = append(out, m.row(sel, left+rest+m.nameModule(r.node.Name, r.node.Module, nameW-indent-2, sel)))
	}
	return out
}

func (m *model) threadsView(height int) []string {
	const tidW, nameW = 8, 16
	head := "  " + m.style.colHead.Render(padLeft("SHARE%", pctW)) + " " +
		m.style.colHead.Render(padLeft("TID", tidW)) + "  " +
		m.style.colHead.Render(padRight("NAME", nameW)) + " " +
		m.style.colHead.Render("LATEST STACK") + m.style.dim.Render(" (leaf first)")
	if len(m.data.threads) == 0 {
		return m.emptyBody(height, head)
	}
	out := []string{head}
	v := viewThreads
	stackW := m.width - (gutterW + pctW + 1 + tidW + 2 + nameW + 1)
	for i := m.top[v]; i < len(m.data.threads) && i < m.top[v]+height-1; i++ {
		t := m.data.threads[i]
		sel := i == m.cursor[v]
		name := t.Name
		if name == "" {
			name = "-"
		}
		line := m.gutter(sel) + padLeft(pct(t.Samples, m.data.threadsTotal), pctW) + " " +
			padLeft(strconv.Itoa(t.TID), tidW) + "  " +
			padRight(cut(name, nameW), nameW) + " " +
			cut(stackLine(t.Stack, m.opt.StackFrames), stackW)
		out = append(out, m.row(sel, line))
	}
	return out
}

// stackLine shows up to n frames, leaf first, "leaf < caller < …".
func stackLine(frames []profile.Frame, n int) string {
	if len(frames) == 0 {
		return "(no stack yet)"
	}
	var b strings.Builder
	for i, f := range frames {
		if i == n {
			fmt.Fprintf(&b, " < … %d more", len(frames)-n)
			break
		}
		if i > 0 {
			b.WriteString(" < ")
		}
		b.WriteString(f.Name())
	}
	return b.String()
}

// pct formats n/of as a percentage with one decimal.
func pct(n, of int64) string {
	if of <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64) + "%"
}

// fmtDur prints a pause compactly: 850ns, 42µs, 1.3ms.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

func fmtSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// fmtElapsed prints how long the UI has been running, like top's uptime.
func fmtElapsed(d time.Duration) string {
	d = d.Truncate(time.Second)
	if d < 0 {
		d = 0
	}
	h, mn, s := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, mn, s)
	}
	return fmt.Sprintf("%02d:%02d", mn, s)
}
