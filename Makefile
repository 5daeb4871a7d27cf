# Build, test and run the broker. `make help` lists the targets.
#
# The test targets run scripts/test.sh, which prints every go test line and a
# closing count; `make test` is the one command that runs everything (CI runs
# it through .ci/run).

GO       ?= go
FUZZTIME ?= 30s
BENCH    ?= .

export PATH := $(PATH):/usr/local/go/bin

.PHONY: help build test test-race unit integ e2e lint verify fuzz bench bench-go run down status clean \
	images compose-up compose-down demo compose-test run-secure compose-up-secure demo-secure compose-test-secure bench-secure

help:
	@echo "build      static bin/broker and bin/kafka-admin"
	@echo "test       install deps, go vet, -race tests of all packages, then ./test/... (CI)"
	@echo "test-race  -race tests of all packages but ./test/..."
	@echo "unit       tests without ZooKeeper (-short, no TestZK*) and without ./test/..."
	@echo "integ      real-ZooKeeper tests (TestZK*), -race; BROKER_TEST_ZK=host:port to reuse a server"
	@echo "e2e        black-box tests of the built binary in ./test/..."
	@echo "lint       gofmt, go vet, golangci-lint if installed"
	@echo "verify     lint plus a go mod tidy check"
	@echo "fuzz       each Fuzz* target for FUZZTIME (default 30s)"
	@echo "bench      kbench side by side: a 3-broker cluster vs in-memory kfake (bench-cluster)"
	@echo "bench-compact  bench twice on one cluster, without and with a compacted topic cleaned beside (BENCH_COMPACT_RATE)"
	@echo "bench-txn  bench's txn scenarios: transactional produce (10 and 1,000 records a transaction) beside idempotent produce"
	@echo "bench-go   go test benchmarks of logstore, partition and protocol"
	@echo "bench-scale  cmd/kscale: issue 16's table at BENCH_SCALE_PARTITIONS (default \"1000 10000\") partitions RF 3 on 3 brokers"
	@echo "run        scripts/cluster.sh up: ZooKeeper and BROKERS (default 1) brokers"
	@echo "down       scripts/cluster.sh down"
	@echo "status     scripts/cluster.sh status"
	@echo "clean      scripts/cluster.sh clean, and remove bin/"
	@echo "images     scripts/images.sh: kafkazk/broker (FROM scratch) and a ZooKeeper image from Debian"
	@echo "compose-up images, then docker-compose.yml's ZooKeeper and 3 brokers (127.0.0.1:19092-19094)"
	@echo "compose-down  remove the compose cluster's containers, network and volumes"
	@echo "demo       scripts/demo-failover.sh: kill the leader's container, watch failover (DEMO_ARGS=--pause|--partition)"
	@echo "compose-test  scripts/compose-test.sh: images, compose cluster, failover with assertions, teardown"
	@echo "run-secure SECURITY=sasl_ssl scripts/cluster.sh up: SASL_SSL+SCRAM, ACLs, ZooKeeper digest auth (README: Security)"
	@echo "compose-up-secure  docker-compose.yml with docker-compose.secure.yml: SASL_SSL+SCRAM clients, TLS between brokers"
	@echo "demo-secure    the failover demo, unchanged, on the secured compose cluster"
	@echo "compose-test-secure  compose-test on the secured compose cluster"
	@echo "bench-secure   kbench 1 KiB acks=all produce and consume over SASL_SSL beside PLAINTEXT on one cluster, with the ratio"
	@echo "chaos-compose  the chaos workload and checker against the docker-compose cluster with docker faults (project chaosops)"
	@echo "soak       DURATION (30m) of the random fault mix on local processes, then heal, final read and the table"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/broker ./cmd/broker
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/kafka-admin ./cmd/kafka-admin

test:
	@scripts/test.sh all

test-race:
	@scripts/test.sh race

unit:
	@scripts/test.sh unit

integ:
	@scripts/test.sh integ

e2e:
	@scripts/test.sh e2e

lint:
	@echo "gofmt -l"; \
	files=$$(find . \( -name .git -o -name .cluster -o -name testdata -o -name bin \) -prune -o -name '*.go' -print | xargs -r gofmt -l); \
	if [ -n "$$files" ]; then echo "gofmt: these files need formatting:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	@if command -v golangci-lint >/dev/null 2>&1; then \
		echo "golangci-lint run ./..."; golangci-lint run ./...; \
	else \
		echo "golangci-lint not installed: skipped"; \
	fi

verify: lint
	$(GO) mod tidy -diff

fuzz:
	@FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench: bench-cluster

bench-go:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem ./logstore/ ./partition/ ./protocol/

run:
	@scripts/cluster.sh up

down:
	@scripts/cluster.sh down

status:
	@scripts/cluster.sh status

clean:
	@scripts/cluster.sh clean
	rm -rf bin

images:
	@scripts/images.sh

compose-up:
	@scripts/demo-failover.sh up

compose-down:
	@scripts/demo-failover.sh down

demo:
	@scripts/demo-failover.sh $(DEMO_ARGS)

compose-test:
	@scripts/compose-test.sh

# The secured variants (issue 14): README "Security".
run-secure:
	@SECURITY=sasl_ssl scripts/cluster.sh up

compose-up-secure:
	@KAFKAZK_SECURE=1 scripts/demo-failover.sh up

demo-secure:
	@KAFKAZK_SECURE=1 scripts/demo-failover.sh $(DEMO_ARGS)

compose-test-secure:
	@KAFKAZK_SECURE=1 scripts/compose-test.sh

# bench-secure: bench-cluster on a SECURITY=sasl_ssl cluster with a PLAINTEXT
# listener beside: 1 KiB acks=all produce and consume over both, alternating,
# with the SASL_SSL/PLAINTEXT ratio (issue 14's target: at least 0.7).
.PHONY: bench-secure
bench-secure: build
	@BENCH_SECURE=1 scripts/bench.sh

# bench-cluster: scripts/bench.sh builds the broker and cmd/kbench, starts
# ZooKeeper and three brokers in a private directory on their own ports
# (each broker in a memory cgroup, see the script for why), runs kbench
# against them side by side with an in-process kfake cluster
# (--compare-kfake), then removes the cluster. A few minutes on 2 cores.
# KBENCH_ARGS adds kbench flags, e.g. KBENCH_ARGS='--reps=5 --scenarios=produce';
# BENCH_BROKER_MEM_MIB=0 runs the brokers unconfined.
.PHONY: bench-cluster
bench-cluster: build
	@scripts/bench.sh

# bench-compact (issue 13): bench-cluster twice on the same cluster with the
# same KBENCH_ARGS, first as usual, then with kbench --compact-beside
# BENCH_COMPACT_RATE (keyed records/s of 1 KiB over 10,000 keys to a
# compacted RF=3 topic with 8 MiB segments, written throughout the second
# run), then both tables and the with/without ratio of every scenario.
# KBENCH_ARGS='--compact-beside N' make bench is the second run alone.
BENCH_COMPACT_RATE ?= 2000
.PHONY: bench-compact
bench-compact: build
	@BENCH_COMPACT_RATE=$(BENCH_COMPACT_RATE) scripts/bench.sh

# bench-txn (issue 18): bench-cluster with kbench --scenarios txn only:
# transactional produce in transactions of 10 and 1,000 records
# (--txn-records), each run beside an idempotent produce run of the same
# records on the same target, alternating, with the txn/idempotent ratio
# per target (and the cluster/kfake ratio). Needs a broker with
# transactions. KBENCH_ARGS adds flags after ours.
.PHONY: bench-txn
bench-txn: build
	@KBENCH_ARGS="--scenarios=txn $(KBENCH_ARGS)" scripts/bench.sh

# chaos: the fault-injection matrix of issues 6 and 17 (cmd/chaos,
# internal/chaos): every scenario on fresh ZooKeeper-backed clusters (3
# brokers; 2 for the epoch sequences), a history checker, and a Markdown
# report in CHAOS_REPORT. CHAOS_ARGS passes more flags (e.g. -scenarios
# kill-leader,SAFE -keep); `go run ./cmd/chaos -list` lists the scenarios.
# disk-full mounts a tmpfs and needs root (CAP_SYS_ADMIN); zk-down-kill-leader
# starts a ZooKeeper of its own. `make test` runs a subset as TestChaos.
CHAOS_REPORT ?= chaos-report.md
CHAOS_RANDOM ?= 3m
CHAOS_ARGS   ?=

.PHONY: chaos
chaos:
	$(GO) run ./cmd/chaos -random $(CHAOS_RANDOM) -out $(CHAOS_REPORT) $(CHAOS_ARGS)

# bench-scale (issue 16): scripts/bench-scale.sh runs cmd/kscale on a
# fresh ZooKeeper (heap sized for the count) and 3 brokers per partition
# count in BENCH_SCALE_PARTITIONS (default "1000 10000"; add 100000 where
# the machine allows), RF 3: create, idle CPU/RSS/fds, produce spread over
# 1,000 partitions vs 6, controlled shutdown, kill -9 of a broker and of
# the controller, restarts, ZooKeeper's znodes and snapshot. One JSON line
# per figure and a table; nothing asserted. BENCH_SCALE_PPROF=DIR saves a
# CPU profile of each broker per phase; KSCALE_ARGS adds kscale flags.
BENCH_SCALE_PARTITIONS ?= 1000 10000
.PHONY: bench-scale
bench-scale:
	@BENCH_SCALE_PARTITIONS="$(BENCH_SCALE_PARTITIONS)" scripts/bench-scale.sh

# chaos-compose and soak (issue 17 parts 4 and 5).
#
# chaos-compose: scripts/chaos-compose.sh: the same workload and history
# checker as `make chaos` (bin/chaos compose) against the docker-compose
# cluster, with docker kill / stop / pause / network disconnect, iptables and
# tc in the containers' namespaces (nsenter) and docker kill of ZooKeeper.
# Its own project (chaosops) and host ports (39092-39094, ZooKeeper 39181).
# CHAOS_COMPOSE_SCENARIOS=kill,latency picks scenarios
# (`go run ./cmd/chaos compose -list`); CHAOS_COMPOSE_ARGS adds flags.
#
# soak: the Bufstream-style random mix on local processes for DURATION (a
# fresh random subset of kill, SIGTERM, pauses, link cuts, ZooKeeper cut and
# loss and isolation every 10-20 s), then heal, read every replica back and
# print the table (SOAK_REPORT). SOAK_DISK_FULL=1 adds disk full (broker 1's
# data dir on a 512 MiB tmpfs, filled at random; needs root and the logdir
# branch's log dir failure handling).
DURATION       ?= 30m
SOAK_REPORT    ?= soak-report.md
SOAK_DISK_FULL ?= 0

.PHONY: chaos-compose soak
chaos-compose:
	@scripts/chaos-compose.sh

soak:
	@$(GO) run ./cmd/chaos -soak $(DURATION) $(if $(filter 1,$(SOAK_DISK_FULL)),-soak-disk-full) -out $(SOAK_REPORT) $(CHAOS_ARGS); rc=$$?; \
		sed -n '/^| scenario/,/^$$/p' $(SOAK_REPORT) 2>/dev/null; exit $$rc
