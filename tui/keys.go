package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap is every binding of the UI; the key line and the ? screen are
// generated from it, so help cannot drift from behaviour.
type keyMap struct {
	Functions, Tree, Threads, NextView key.Binding
	SortSelf, SortTotal                key.Binding
	Up, Down, PageUp, PageDown         key.Binding
	Home, End                          key.Binding
	Expand, Collapse, Toggle           key.Binding
	Window, Pause, Reset               key.Binding
	Filter, ClearFilter                key.Binding
	Help, Quit                         key.Binding
}

func newKeyMap() keyMap {
	b := func(keys []string, h, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(h, desc))
	}
	return keyMap{
		Functions:   b([]string{"1"}, "1", "functions"),
		Tree:        b([]string{"2"}, "2", "call tree"),
		Threads:     b([]string{"3"}, "3", "threads"),
		NextView:    b([]string{"tab", "shift+tab"}, "tab", "next view"),
		SortSelf:    b([]string{"s", "f1"}, "s/F1", "sort by self"),
		SortTotal:   b([]string{"t", "f2"}, "t/F2", "sort by total"),
		Up:          b([]string{"up", "k"}, "↑/k", "up"),
		Down:        b([]string{"down", "j"}, "↓/j", "down"),
		PageUp:      b([]string{"pgup", "ctrl+b"}, "pgup", "page up"),
		PageDown:    b([]string{"pgdown", "ctrl+f"}, "pgdn", "page down"),
		Home:        b([]string{"home", "g"}, "home/g", "first row"),
		End:         b([]string{"end", "G"}, "end/G", "last row"),
		Expand:      b([]string{"right", "l"}, "→/l", "expand"),
		Collapse:    b([]string{"left", "h"}, "←/h", "collapse / parent"),
		Toggle:      b([]string{"enter"}, "enter", "fold; thread: stacks"),
		Window:      b([]string{"w"}, "w", "window/cumulative"),
		Pause:       b([]string{" ", "p"}, "space/p", "pause"),
		Reset:       b([]string{"r"}, "r", "reset"),
		Filter:      b([]string{"/"}, "/", "filter"),
		ClearFilter: b([]string{"esc"}, "esc", "clear filter"),
		Help:        b([]string{"?"}, "?", "help"),
		Quit:        b([]string{"q", "ctrl+c"}, "q", "quit"),
	}
}

// ShortHelp is the key line at the bottom.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Quit, k.Help, k.NextView, k.Window, k.Pause, k.Reset, k.Filter, k.SortSelf, k.SortTotal}
}

// FullHelp is the ? screen, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Functions, k.Tree, k.Threads, k.NextView, k.SortSelf, k.SortTotal},
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.End, k.Expand, k.Collapse, k.Toggle},
		{k.Window, k.Pause, k.Reset, k.Filter, k.ClearFilter, k.Help, k.Quit},
	}
}
