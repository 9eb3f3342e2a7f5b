package tui

import (
	"os"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"codeberg.org/stacktop/stacktop/profile"
)

type viewKind int

const (
	viewFunctions viewKind = iota
	viewTree
	viewThreads
	numViews
)

// statusMsg carries one poll of the Source and the time it was taken.
type statusMsg struct {
	now    time.Time
	status Status
}

// model is the UI state. Everything View draws is in it: the latest and the
// shown Status, the clock of the last poll, the settings and the derived
// rows, so View is a pure function of the model.
type model struct {
	src   Source
	opt   Options
	keys  keyMap
	help  help.Model
	style styles

	width, height int

	latest   Status    // the newest poll
	shown    Status    // what the views draw: latest, or frozen when paused
	now      time.Time // when latest was polled
	shownNow time.Time // when shown was polled
	started  time.Time // first poll, for the elapsed clock

	paused     bool
	cumulative bool
	since      time.Duration // reset offset, relative to Profile.Start
	bySelf     bool          // functions sorted by self (else total)
	view       viewKind
	showHelp   bool

	// focus is the thread whose stacks the functions and tree views show
	// (Enter on the threads view); 0 is every thread.
	focus     int
	focusName string
	// resetBase is Aggregate(0) at the reset: "since reset" subtracts it,
	// exact even once old samples are folded (see recompute).
	resetBase *profile.Aggregate

	filter  string // applied filter
	editing bool   // the filter line has the keyboard
	input   []rune // filter being typed

	data viewData

	cursor [numViews]int // selected row of each list
	top    [numViews]int // first row shown of each list

	open     map[string]bool // explicit fold state of tree paths
	treeRows []treeRow
	treeSel  string // path of the selected tree row

	crash *crashBox
}

// newModel builds the UI state. profile is the colour profile to render
// with; NO_COLOR (or opt.NoColor) overrides it with plain text.
func newModel(src Source, opt Options, profile termenv.Profile) model {
	opt = opt.withDefaults()
	if opt.NoColor || os.Getenv("NO_COLOR") != "" {
		profile = termenv.Ascii
	}
	r := lipgloss.NewRenderer(discard{})
	r.SetColorProfile(profile)
	r.SetHasDarkBackground(true) // never query the terminal from View
	st := newStyles(r)
	h := help.New()
	h.Styles = help.Styles{
		Ellipsis:       st.dim,
		ShortKey:       st.key,
		ShortDesc:      st.dim,
		ShortSeparator: st.dim,
		FullKey:        st.key,
		FullDesc:       st.plain,
		FullSeparator:  st.dim,
	}
	return model{
		src:        src,
		opt:        opt,
		keys:       newKeyMap(),
		help:       h,
		style:      st,
		width:      80,
		height:     24,
		cumulative: opt.Cumulative,
		bySelf:     !opt.SortByTotal,
		open:       map[string]bool{},
		crash:      &crashBox{},
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Init polls at once, so the first frame has data.
func (m model) Init() tea.Cmd {
	return m.poll(0)
}

// poll asks the Source for a Status after d, on a command goroutine: a slow
// Source delays the next frame but never the key handling. Only one poll is
// in flight at a time; the next one is scheduled when this one arrives.
func (m model) poll(d time.Duration) tea.Cmd {
	src, crash := m.src, m.crash
	get := func(now time.Time) (msg tea.Msg) {
		defer func() {
			if r := recover(); r != nil {
				crash.record(r)
				msg = crashMsg{}
			}
		}()
		return statusMsg{now: now, status: src.Snapshot()}
	}
	if d <= 0 {
		return func() tea.Msg { return get(time.Now()) }
	}
	return tea.Tick(d, func(t time.Time) tea.Msg { return get(t) })
}

// Update applies one message. A panic in it is recorded and ends the
// program cleanly (see crashBox).
func (m model) Update(msg tea.Msg) (out tea.Model, cmd tea.Cmd) {
	defer func() {
		if r := recover(); r != nil {
			m.crash.record(r)
			out, cmd = m, tea.Quit
		}
	}()
	if m.crash.failed() {
		return m, tea.Quit
	}
	switch msg := msg.(type) {
	case crashMsg:
		return m, tea.Quit
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.scrollAll()
		return m, nil
	case statusMsg:
		m = m.receive(msg)
		return m, m.poll(m.opt.Refresh)
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

// receive stores a poll; the views follow it unless paused.
func (m model) receive(msg statusMsg) model {
	if m.started.IsZero() {
		m.started = msg.now
	}
	m.latest, m.now = msg.status, msg.now
	if !m.paused {
		m.shown, m.shownNow = m.latest, m.now
		m.recompute()
	}
	return m
}

func (m model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if msg.Type == tea.KeyCtrlC {
		return m, tea.Quit
	}
	if m.editing {
		m.editFilter(msg)
		return m, nil
	}
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.showHelp = !m.showHelp
	case m.showHelp && key.Matches(msg, k.ClearFilter):
		m.showHelp = false
	case key.Matches(msg, k.Functions):
		m.view = viewFunctions
	case key.Matches(msg, k.Tree):
		m.view = viewTree
	case key.Matches(msg, k.Threads):
		m.view = viewThreads
	case key.Matches(msg, k.NextView):
		if msg.Type == tea.KeyShiftTab {
			m.view = (m.view + numViews - 1) % numViews
		} else {
			m.view = (m.view + 1) % numViews
		}
	case key.Matches(msg, k.SortSelf):
		m.bySelf = true
		sortFunctions(m.data.funcs, true)
	case key.Matches(msg, k.SortTotal):
		m.bySelf = false
		sortFunctions(m.data.funcs, false)
	case key.Matches(msg, k.Window):
		m.cumulative = !m.cumulative
		m.recompute()
	case key.Matches(msg, k.Pause):
		m.paused = !m.paused
		if !m.paused {
			m.shown, m.shownNow = m.latest, m.now
			m.recompute()
		}
	case key.Matches(msg, k.Reset):
		if p := m.shown.Profile; p != nil {
			// Samples stamped after the newest one shown; Aggregate
			// takes events at or after its start.
			m.since = p.Duration() + time.Nanosecond
			m.resetBase = p.Aggregate(0)
			m.recompute()
		}
	case key.Matches(msg, k.Filter):
		m.editing, m.input = true, []rune(m.filter)
	case m.view == viewThreads && key.Matches(msg, k.Toggle):
		if c := m.cursor[viewThreads]; c < len(m.data.threads) {
			// The thread's stacks: the call tree of its samples only.
			m.focus, m.focusName = m.data.threads[c].TID, m.data.threads[c].Name
			m.view = viewTree
			m.recompute()
		}
	case key.Matches(msg, k.ClearFilter):
		switch {
		case m.filter != "":
			m.filter = ""
			m.recompute()
		case m.focus != 0:
			m.focus, m.focusName = 0, ""
			m.view = viewThreads
			m.recompute()
		}
	default:
		m.navigate(msg)
	}
	m.scrollAll()
	return m, nil
}

// editFilter is a one-line text input: bubbles/textinput would do, but it
// pulls in a clipboard module this build does not carry.
func (m *model) editFilter(msg tea.KeyMsg) {
	switch msg.Type {
	case tea.KeyEnter:
		m.editing = false
		m.filter = string(m.input)
		m.recompute()
	case tea.KeyEsc:
		m.editing, m.input, m.filter = false, nil, ""
		m.recompute()
	case tea.KeyBackspace, tea.KeyCtrlH:
		if len(m.input) > 0 {
			m.input = m.input[:len(m.input)-1]
		}
	case tea.KeyCtrlU:
		m.input = nil
	case tea.KeyCtrlW:
		i := len(m.input)
		for i > 0 && m.input[i-1] == ' ' {
			i--
		}
		for i > 0 && m.input[i-1] != ' ' {
			i--
		}
		m.input = m.input[:i]
	case tea.KeySpace:
		m.input = append(m.input, ' ')
	case tea.KeyRunes:
		for _, r := range msg.Runes {
			if r >= ' ' && r != 0x7f {
				m.input = append(m.input, r)
			}
		}
	}
}

// recompute rebuilds the derived rows from the shown snapshot.
func (m *model) recompute() {
	p := m.shown.Profile
	if p == nil {
		m.data = viewData{}
		m.treeRows = nil
		return
	}
	from := windowStart(p, m.cumulative, m.opt.Window, m.since)
	var base *profile.Aggregate
	if m.since > 0 && from == m.since {
		base = m.resetBase
	}
	m.data = derive(p, from, base, m.filter, m.bySelf, m.focus)
	m.reflowTree()
}

// reflowTree lists the visible tree rows and finds the selected path again;
// if it is gone the cursor stays at the same height.
func (m *model) reflowTree() {
	m.treeRows = flattenTree(m.data.tree, m.open, m.data.hot)
	c := &m.cursor[viewTree]
	for i, r := range m.treeRows {
		if r.path == m.treeSel {
			*c = i
			return
		}
	}
	*c = clamp(*c, 0, len(m.treeRows)-1)
	if *c < len(m.treeRows) {
		m.treeSel = m.treeRows[*c].path
	}
}

func (m *model) rows(v viewKind) int {
	switch v {
	case viewFunctions:
		return len(m.data.funcs)
	case viewTree:
		return len(m.treeRows)
	default:
		return len(m.data.threads)
	}
}

func (m *model) navigate(msg tea.KeyMsg) {
	k := m.keys
	c := &m.cursor[m.view]
	n := m.rows(m.view)
	page := max(m.bodyHeight()-1, 1)
	switch {
	case key.Matches(msg, k.Up):
		*c--
	case key.Matches(msg, k.Down):
		*c++
	case key.Matches(msg, k.PageUp):
		*c -= page
	case key.Matches(msg, k.PageDown):
		*c += page
	case key.Matches(msg, k.Home):
		*c = 0
	case key.Matches(msg, k.End):
		*c = n - 1
	case m.view == viewTree && key.Matches(msg, k.Expand, k.Toggle, k.Collapse):
		m.fold(msg)
		return
	}
	*c = clamp(*c, 0, n-1)
	if m.view == viewTree && *c < len(m.treeRows) {
		m.treeSel = m.treeRows[*c].path
	}
}

// fold opens or closes the selected node. Right on an open node steps to
// its first child, left on a closed node or a leaf steps to the parent, as
// in most tree widgets.
func (m *model) fold(msg tea.KeyMsg) {
	c := m.cursor[viewTree]
	if c >= len(m.treeRows) {
		return
	}
	r := m.treeRows[c]
	hasKids := len(r.node.Children) > 0
	switch {
	case key.Matches(msg, m.keys.Toggle):
		if hasKids {
			m.open[r.path] = !r.open
		}
	case key.Matches(msg, m.keys.Expand):
		if hasKids && !r.open {
			m.open[r.path] = true
		} else if r.open {
			m.treeSel = m.treeRows[c+1].path
		}
	case key.Matches(msg, m.keys.Collapse):
		if r.open {
			m.open[r.path] = false
		} else if r.parent >= 0 {
			m.treeSel = m.treeRows[r.parent].path
		}
	}
	m.reflowTree()
}

// scrollAll keeps each list's cursor inside the rows shown.
func (m *model) scrollAll() {
	h := max(m.bodyHeight()-1, 1) // minus the column header
	for v := range numViews {
		n := m.rows(v)
		m.cursor[v] = clamp(m.cursor[v], 0, n-1)
		t := &m.top[v]
		if m.cursor[v] < *t {
			*t = m.cursor[v]
		}
		if m.cursor[v] >= *t+h {
			*t = m.cursor[v] - h + 1
		}
		*t = clamp(*t, 0, max(n-h, 0))
	}
}

func clamp(v, lo, hi int) int {
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}
