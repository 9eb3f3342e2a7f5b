package procmaps

import "testing"

func TestReadPerfEventSysctls(t *testing.T) {
	s, err := ReadPerfEventSysctls()
	if err != nil {
		t.Skipf("no perf events here: %v", err)
	}
	if s.Paranoid < -1 || s.Paranoid > 4 || s.MlockKB <= 0 {
		t.Errorf("implausible settings %+v", s)
	}
}
