package cluster

import "testing"

func TestIsInternalTopic(t *testing.T) {
	for topic, want := range map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "orders": false, "_consumer_offsets": false, "": false} {
		if got := IsInternalTopic(topic); got != want {
			t.Errorf("IsInternalTopic(%q) = %v, want %v", topic, got, want)
		}
	}
}

// TestBrokerClone: the clone shares no endpoint slice or rack with b.
func TestBrokerClone(t *testing.T) {
	rack := "r1"
	b := Broker{ID: 1, Endpoints: []Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092}}, Rack: &rack, Epoch: 7}
	c := b.Clone()
	c.Endpoints[0].Host = "other"
	*c.Rack = "r2"
	if b.Endpoints[0].Host != "h" || *b.Rack != "r1" || c.ID != 1 || c.Epoch != 7 {
		t.Fatalf("clone shares state with the original: %+v / %+v", b, c)
	}
}
