package fleet

import "testing"

func TestPyroscopeName(t *testing.T) {
	s := &PyroscopeSink{AppName: "web", Tags: map[string]string{"region": "eu", "env": "prod"}}
	if got := s.Name(false); got != "web.cpu{env=prod,region=eu}" {
		t.Errorf("name %q", got)
	}
	if got := s.Name(true); got != "web.wall{env=prod,region=eu}" {
		t.Errorf("wall-clock name %q", got)
	}
	s = &PyroscopeSink{AppName: "web.wall"}
	if got := s.Name(false); got != "web.wall{}" {
		t.Errorf("name %q", got)
	}
	for _, bad := range []string{"noequals", "=v", "1x=v", "k=a,b", "k={x}", "k y=v"} {
		if _, _, err := ParseTag(bad); err == nil {
			t.Errorf("ParseTag(%q) accepted", bad)
		}
	}
	if k, v, err := ParseTag("service_name=my.app"); err != nil || k != "service_name" || v != "my.app" {
		t.Errorf("ParseTag: %q %q %v", k, v, err)
	}
}
