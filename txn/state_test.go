package txn

import "testing"

// TestLegalTransitions pins the state machine to Kafka's
// validPreviousStates (TransactionMetadata.scala, transaction version 0).
func TestLegalTransitions(t *testing.T) {
	E, O, PC, PA, CC, CA, D, PF := stateEmpty, stateOngoing, statePrepareCommit, statePrepareAbort,
		stateCompleteCommit, stateCompleteAbort, stateDead, statePrepareEpochFence
	legal := map[[2]txnState]bool{
		{E, E}: true, {CC, E}: true, {CA, E}: true,
		{O, O}: true, {E, O}: true, {CC, O}: true, {CA, O}: true,
		{O, PC}: true,
		{O, PA}: true, {PF, PA}: true,
		{PC, CC}: true,
		{PA, CA}: true,
		{E, D}:   true, {CA, D}: true, {CC, D}: true,
		{O, PF}: true,
	}
	all := []txnState{E, O, PC, PA, CC, CA, D, PF}
	for _, from := range all {
		for _, to := range all {
			if got := legalTransition(from, to); got != legal[[2]txnState{from, to}] {
				t.Errorf("%s -> %s: legal %v", from, to, got)
			}
			m := newMeta("x", 1, 1000, 0)
			m.producerEpoch, m.state = 0, from
			_, err := m.prepareTransition(to, 1, 0, -1, 1000, nil, -1, 0)
			if (err == nil) != legal[[2]txnState{from, to}] {
				t.Errorf("prepare %s -> %s: %v", from, to, err)
			}
			if err == nil && !(m.hasPending && m.pending == to) {
				t.Errorf("prepare %s -> %s left pending %v %s", from, to, m.hasPending, m.pending)
			}
		}
	}
	for i, name := range []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"} {
		if s, ok := stateFromName(name); !ok || s != txnState(i) || s.String() != name {
			t.Errorf("state %d: %q %v", i, s, ok)
		}
	}
}

func TestPrepareWhilePendingRefused(t *testing.T) {
	m := newMeta("x", 1, 1000, 0)
	if _, err := m.prepareIncrementEpoch(1000, nil, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.prepareIncrementEpoch(1000, nil, 1); err == nil {
		t.Fatal("second prepare while pending accepted")
	}
}

func TestCompleteTransitionChecks(t *testing.T) {
	m := newMeta("x", 1, 1000, 0)
	tr, err := m.prepareIncrementEpoch(1000, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	other := tr
	other.state = stateOngoing
	if err := m.completeTransition(other); err == nil {
		t.Fatal("completed a transition that is not the pending one")
	}
	if err := m.completeTransition(tr); err != nil || m.state != stateEmpty || m.producerEpoch != 0 || m.hasPending {
		t.Fatalf("complete: %v %+v", err, m)
	}
	// An epoch jump of two is not a bump.
	tr, _ = m.prepareIncrementEpoch(1000, nil, 2)
	tr.producerEpoch = 5
	if err := m.completeTransition(tr); err == nil || m.producerEpoch != 0 {
		t.Fatalf("epoch jump accepted: %v %+v", err, m)
	}
}
