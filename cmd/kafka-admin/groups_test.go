package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseTopicArgs(t *testing.T) {
	named, whole, err := parseTopicArgs([]string{"foo:0,2", "bar"})
	if err != nil || len(named) != 2 || named[1] != tp("foo", 2) || len(whole) != 1 || whole[0] != "bar" {
		t.Fatalf("%v %v %v", named, whole, err)
	}
	for in, want := range map[string]string{
		"foo:x":   "Invalid partition 'x' specified in topic arg 'foo:x''",
		"foo:1:2": "Invalid topic arg 'foo:1:2', expected topic name and partitions",
		":1":      "Invalid topic arg ':1'",
	} {
		if _, _, err := parseTopicArgs([]string{in}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// OffsetDelete through kfake: a committed offset of an empty group is
// deleted and reported per partition; an unknown group fails with Kafka's
// message and exit 1.
func TestDeleteOffsets(t *testing.T) {
	fc := newFakeCluster(t, "foo")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(fc.bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.AddOffset("foo", 0, 5, -1)
	os.AddOffset("foo", 1, 7, -1)
	if err := adm.CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runAdmin(t, "consumer-groups", "--bootstrap-server", fc.bootstrap, "--delete-offsets", "--group", "g", "--topic", "foo:0")
	want := "Request succeed for deleting offsets with topic foo:0 group g\n\n" +
		"TOPIC                          PARTITION       STATUS         \n" +
		"foo                            0               Successful     \n"
	if code != 0 || out != want {
		t.Fatalf("exit %d %s\n%q\nwant\n%q", code, errOut, out, want)
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("foo", 0); ok {
		t.Fatal("foo-0's offset survived OffsetDelete")
	}
	if o, ok := fetched.Lookup("foo", 1); !ok || o.At != 7 {
		t.Fatalf("foo-1's offset = %+v %v, want 7 kept", o, ok)
	}

	code, out, errOut = runAdmin(t, "consumer-groups", "--bootstrap-server", fc.bootstrap, "--delete-offsets", "--group", "nobody", "--topic", "foo")
	if code != 1 || !strings.HasPrefix(out, "Error: 'nobody' does not exist.\n") || !strings.Contains(errOut, "GROUP_ID_NOT_FOUND") {
		t.Fatalf("unknown group: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runAdmin(t, "consumer-groups", "--bootstrap-server", fc.bootstrap, "--delete-offsets", "--group", "g")
	if code != 2 || !strings.Contains(errOut, "--topic") {
		t.Fatalf("no topic: exit %d %s", code, errOut)
	}
}
