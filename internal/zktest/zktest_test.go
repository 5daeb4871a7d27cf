package zktest

import "testing"

func TestZKStart(t *testing.T) {
	s := Start(t)
	if s.cmd != nil && !Ruok(s.Addr) {
		t.Fatalf("server at %s does not answer ruok", s.Addr)
	}
}
