package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestLeaderElectionArgs(t *testing.T) {
	f := writeFile(t, "e.json", `{"partitions":[{"topic":"foo","partition":1}]}`)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--election-type", "preferred", "--all-topic-partitions"}, "Missing required option(s): bootstrap-server"},
		{[]string{"--bootstrap-server", "x:1", "--all-topic-partitions"}, "Missing required option(s): election-type"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "sideways", "--all-topic-partitions"}, `"sideways" is not one of PREFERRED, UNCLEAN`},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred"}, "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred", "--topic", "foo", "--all-topic-partitions"}, "One and only one"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred", "--topic", "foo"}, "Missing required option(s): partition"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred", "--path-to-json-file", f, "--partition", "1"}, "Option partition is only allowed if topic is used"},
	}
	for _, c := range cases {
		code, _, errOut := runAdmin(t, append([]string{"leader-election"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestParseElectionJSON(t *testing.T) {
	tps, err := parseElectionJSON([]byte(`{"partitions":[{"topic": "foo", "partition": 1},{"topic": "foobar", "partition": 2}]}`))
	if err != nil || len(tps) != 2 || tps[1] != tp("foobar", 2) {
		t.Fatalf("%v %v", tps, err)
	}
	for in, want := range map[string]string{
		`{}`: `Replica election data is missing "partitions" field`,
		`{"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":0}]}`: "Replica election data contains duplicate partitions: a-0",
		`{"partitions":[{"topic":"a"}]}`:                                           `needs "topic" and "partition"`,
		`[`:                                                                        "not valid",
	} {
		if _, err := parseElectionJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// Each partition's result is printed in Kafka's words; ELECTION_NOT_NEEDED
// is not a failure, any other error is, with its name.
func TestLeaderElectionReport(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	codes := map[int32]int16{0: 0, 1: kerr.ElectionNotNeeded.Code, 2: kerr.PreferredLeaderNotAvailable.Code}
	fc.answer(43, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.ElectLeadersRequest)
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = "foo"
		for p := range int32(3) {
			if r.Topics != nil && !containsPartition(r.Topics, p) {
				continue
			}
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[p]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		return resp
	})
	code, out, errOut := runAdmin(t, "leader-election", "--bootstrap-server", fc.bootstrap, "--election-type", "PREFERRED", "--all-topic-partitions")
	want := "Successfully completed leader election (PREFERRED) for partitions foo-0\n" +
		"Valid replica already elected for partitions foo-1\n" +
		"Error completing leader election (PREFERRED) for partition: foo-2: " + kerr.PreferredLeaderNotAvailable.Error() + "\n"
	if code != 1 || out != want || !strings.Contains(errOut, "1 replica(s) could not be elected") {
		t.Fatalf("exit %d\n%s\nwant:\n%s\nstderr %s", code, out, want, errOut)
	}
	if r := fc.requests(43)[0].(*kmsg.ElectLeadersRequest); r.Topics != nil || r.ElectionType != 0 {
		t.Fatalf("--all-topic-partitions sent topics %v type %d, want null and 0", r.Topics, r.ElectionType)
	}

	code, out, _ = runAdmin(t, "leader-election", "--bootstrap-server", fc.bootstrap, "--election-type", "unclean", "--topic", "foo", "--partition", "0")
	if code != 0 || out != "Successfully completed leader election (UNCLEAN) for partitions foo-0\n" {
		t.Fatalf("one partition: exit %d\n%s", code, out)
	}
	r := fc.requests(43)[1].(*kmsg.ElectLeadersRequest)
	if r.ElectionType != 1 || len(r.Topics) != 1 || r.Topics[0].Topic != "foo" || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("request %+v", r)
	}
}

func containsPartition(ts []kmsg.ElectLeadersRequestTopic, p int32) bool {
	for _, t := range ts {
		for _, q := range t.Partitions {
			if q == p {
				return true
			}
		}
	}
	return false
}
