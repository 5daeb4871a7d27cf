package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/internal/coordlog"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/zkcoord"
)

// TestGroupCoordinatorLeavesOfflineLogDir: a __consumer_offsets replica
// whose log dir failed (a real ENOSPC on a tmpfs) answers the next
// LeaderAndIsr with KAFKA_STORAGE_ERROR, and the group coordinator stops
// coordinating its groups (NOT_COORDINATOR) instead of serving a cache it
// can no longer write. Mounting needs root; without it the test skips.
func TestGroupCoordinatorLeavesOfflineLogDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs for a full disk needs root")
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	replicas, err := partition.NewManager(partition.Config{BrokerID: 1, LogDirs: []string{disk}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = replicas.Close()
		_ = exec.Command("umount", "-l", disk).Run()
	})
	groups := group.New(group.Config{BrokerID: 1, NumPartitions: 1, InitialRebalanceDelay: -1,
		Log: offsetsLog{replicas}, Logger: log})
	t.Cleanup(func() { _ = groups.Close() })
	failed := make(chan partition.LogDirFailure, 1)
	replicas.SetLogDirFailureHandler(func(f partition.LogDirFailure) { failed <- f })
	cp := &controlPlane{brokerID: 1, defaults: cluster.DefaultLogConfig(), session: &zkcoord.Session{},
		replicas: replicas, groups: groups, log: log}
	tp := cluster.TopicPartition{Topic: group.Topic, Partition: 0}
	leaderAndIsr := func(epoch, zkVersion int32) error {
		errs, err := cp.LeaderAndIsr(context.Background(), cluster.LeaderAndIsrRequest{Partitions: []cluster.PartitionAssignment{{
			TopicPartition: tp, Replicas: []int32{1, 2},
			LeaderAndIsr: cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: epoch, Isr: []int32{1}, ZkVersion: zkVersion},
		}}})
		if err != nil {
			return err
		}
		return errs[tp]
	}
	coordinating := func() error {
		deadline := time.Now().Add(2 * time.Second)
		for {
			_, err := groups.FetchOffsets("g", nil, false)
			if !errors.Is(err, group.ErrCoordinatorLoadInProgress) || time.Now().After(deadline) {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := leaderAndIsr(5, 0); err != nil {
		t.Fatal(err)
	}
	if err := coordinating(); err != nil {
		t.Fatalf("leader in epoch 5: %v, want to coordinate", err)
	}
	// Fill the disk, then write: ENOSPC takes the dir offline.
	f, err := os.Create(filepath.Join(disk, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	_ = f.Close()
	big := make([]byte, 0, 256<<10)
	for len(big) < 200<<10 {
		big = append(big, "0123456789abcdef"...)
	}
	batch, err := coordlog.EncodeBatch([]coordlog.Record{{Key: []byte("k"), Value: big}}, time.Now().UnixMilli(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := replicas.Append(tp, batch, 1); errors.Is(err, partition.ErrStorage) {
			break
		}
	}
	select {
	case fl := <-failed:
		if !errors.Is(fl.Err, syscall.ENOSPC) {
			t.Errorf("log dir failure %v, want ENOSPC", fl.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the full disk did not take the log dir offline")
	}
	if err := leaderAndIsr(6, 1); !errors.Is(err, partition.ErrStorage) {
		t.Fatalf("LeaderAndIsr for the offline replica: %v, want ErrStorage", err)
	}
	if err := coordinating(); !errors.Is(err, group.ErrNotCoordinator) {
		t.Fatalf("after its replica went offline: %v, want ErrNotCoordinator", err)
	}
}
