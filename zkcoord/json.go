package zkcoord

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/kafkazk/broker/cluster"
)

// This file holds the payload of every znode zkcoord reads or writes, in
// Apache Kafka's own JSON (ZkData.scala), so that zkCli.sh and Kafka's tools
// see a cluster that looks like Kafka's. Field order in the structs is the
// order of the bytes written; golden tests pin them.

// ErrBadZNode wraps every failure to decode a znode payload.
var ErrBadZNode = errors.New("zkcoord: malformed znode data")

// marshal encodes v without HTML escaping, as Jackson does, and without the
// trailing newline of json.Encoder.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every type encoded here is a plain struct of strings, numbers,
		// slices and maps: failing to encode one is a programming error.
		panic(fmt.Sprintf("zkcoord: encode %T: %v", v, err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func decodeErr(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrBadZNode, what, err)
}

// ---- /brokers/ids/<id> ----

// brokerRegistrationVersion is the version of /brokers/ids/<id> written (0.10.0–2.6).
const brokerRegistrationVersion = 4

// brokerRegistration is the payload of /brokers/ids/<id> (ZkData BrokerIdZNode).
type brokerRegistration struct {
	Version                     int               `json:"version"`
	Host                        *string           `json:"host"`
	Port                        int32             `json:"port"`
	JmxPort                     int32             `json:"jmx_port"`
	Timestamp                   string            `json:"timestamp"`
	Endpoints                   []string          `json:"endpoints"`
	ListenerSecurityProtocolMap map[string]string `json:"listener_security_protocol_map,omitempty"`
	Rack                        *string           `json:"rack,omitempty"`
}

// encodeBrokerRegistration builds the version 4 registration: host and port
// from the first PLAINTEXT endpoint (null and -1 without one), jmx_port -1,
// the timestamp in ms as a string, and rack only if set.
func encodeBrokerRegistration(endpoints []cluster.Endpoint, rack string, timestampMs int64) []byte {
	r := brokerRegistration{
		Version:                     brokerRegistrationVersion,
		Port:                        -1,
		JmxPort:                     -1,
		Timestamp:                   strconv.FormatInt(timestampMs, 10),
		Endpoints:                   make([]string, 0, len(endpoints)),
		ListenerSecurityProtocolMap: make(map[string]string, len(endpoints)),
	}
	for _, e := range endpoints {
		proto := e.SecurityProtocol
		if proto == "" {
			proto = "PLAINTEXT"
		}
		if r.Host == nil && proto == "PLAINTEXT" {
			h := e.Host
			r.Host, r.Port = &h, e.Port
		}
		r.Endpoints = append(r.Endpoints, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		r.ListenerSecurityProtocolMap[e.Listener] = proto
	}
	if rack != "" {
		r.Rack = &rack
	}
	return marshal(r)
}

// decodeBrokerRegistration parses any version of /brokers/ids/<id>. Version 1
// and 2 registrations without endpoints yield one PLAINTEXT endpoint from
// host and port.
func decodeBrokerRegistration(id int32, data []byte) (cluster.Broker, error) {
	var r brokerRegistration
	if err := json.Unmarshal(data, &r); err != nil {
		return cluster.Broker{}, decodeErr(brokerPath(id), err)
	}
	b := cluster.Broker{ID: id, Rack: r.Rack}
	for _, s := range r.Endpoints {
		e, err := parseEndpoint(s, r.ListenerSecurityProtocolMap)
		if err != nil {
			return cluster.Broker{}, decodeErr(brokerPath(id), err)
		}
		b.Endpoints = append(b.Endpoints, e)
	}
	if len(b.Endpoints) == 0 && r.Host != nil && r.Port >= 0 {
		b.Endpoints = []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: *r.Host, Port: r.Port}}
	}
	return b, nil
}

// parseEndpoint parses "LISTENER://host:port" (host may be empty or a
// bracketed IPv6 address). The security protocol comes from the map, or is
// the listener name itself as in registrations before version 4.
func parseEndpoint(s string, protocols map[string]string) (cluster.Endpoint, error) {
	listener, hostPort, ok := strings.Cut(s, "://")
	if !ok || listener == "" {
		return cluster.Endpoint{}, fmt.Errorf("endpoint %q is not LISTENER://host:port", s)
	}
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return cluster.Endpoint{}, fmt.Errorf("endpoint %q: %v", s, err)
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil || port < 0 || port > 65535 {
		return cluster.Endpoint{}, fmt.Errorf("endpoint %q: bad port", s)
	}
	proto := protocols[listener]
	if proto == "" {
		proto = listener
	}
	return cluster.Endpoint{Listener: listener, SecurityProtocol: proto, Host: host, Port: int32(port)}, nil
}

// ---- /controller ----

// controllerData is the payload of /controller (ZkData ControllerZNode).
type controllerData struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

func encodeController(brokerID int32, timestampMs int64) []byte {
	return marshal(controllerData{Version: 1, BrokerID: brokerID, Timestamp: strconv.FormatInt(timestampMs, 10)})
}

// decodeController returns the broker id in /controller.
func decodeController(data []byte) (int32, error) {
	var c struct {
		BrokerID *int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return -1, decodeErr(controllerPath, err)
	}
	if c.BrokerID == nil {
		return -1, decodeErr(controllerPath, errors.New("no brokerid"))
	}
	return *c.BrokerID, nil
}

// ---- /controller_epoch ----

// encodeControllerEpoch writes the epoch as a plain decimal integer, not JSON.
func encodeControllerEpoch(epoch int32) []byte { return []byte(strconv.FormatInt(int64(epoch), 10)) }

func decodeControllerEpoch(data []byte) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
	if err != nil {
		return 0, decodeErr(controllerEpochPath, err)
	}
	return int32(n), nil
}

// ---- /brokers/topics/<t> ----

// partitionReplicas is a partition -> replicas map whose JSON keys are the
// partition ids as strings, written in numeric order.
type partitionReplicas map[int32][]int32

func (m partitionReplicas) MarshalJSON() ([]byte, error) {
	ids := make([]int32, 0, len(m))
	for p := range m {
		ids = append(ids, p)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, p := range ids {
		if i > 0 {
			buf.WriteByte(',')
		}
		replicas := m[p]
		if replicas == nil {
			replicas = []int32{}
		}
		r, err := json.Marshal(replicas)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "%q:%s", strconv.Itoa(int(p)), r)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func (m *partitionReplicas) UnmarshalJSON(data []byte) error {
	var raw map[string][]int32
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make(partitionReplicas, len(raw))
	for k, v := range raw {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil || p < 0 {
			return fmt.Errorf("partition %q is not a partition id", k)
		}
		out[int32(p)] = v
	}
	*m = out
	return nil
}

// topicAssignment is the payload of /brokers/topics/<t> (ZkData TopicZNode),
// version 2 (KIP-455); version 1 had only partitions.
type topicAssignment struct {
	Version          int               `json:"version"`
	Partitions       partitionReplicas `json:"partitions"`
	AddingReplicas   partitionReplicas `json:"adding_replicas"`
	RemovingReplicas partitionReplicas `json:"removing_replicas"`
}

func encodeTopicAssignment(assignment map[int32][]int32) []byte {
	return marshal(topicAssignment{
		Version:          2,
		Partitions:       partitionReplicas(assignment),
		AddingReplicas:   partitionReplicas{},
		RemovingReplicas: partitionReplicas{},
	})
}

// decodeTopicAssignment returns the replicas of every partition; it accepts
// versions 1 and 2 and leaves out reassignment state (see
// decodeTopicAssignmentFull).
func decodeTopicAssignment(topic string, data []byte) (map[int32][]int32, error) {
	a, err := decodeTopicAssignmentFull(topic, data)
	if err != nil {
		return nil, err
	}
	return a.Replicas, nil
}

// fullAssignment is a topic znode with its reassignment state (Kafka's
// ReplicaAssignment per partition): Replicas is RS, and Adding and Removing
// hold AR and RR for the partitions being reassigned only.
type fullAssignment struct {
	Replicas map[int32][]int32
	Adding   map[int32][]int32
	Removing map[int32][]int32
}

// decodeTopicAssignmentFull parses a version 1 or 2 topic znode, keeping
// adding_replicas and removing_replicas (version 2, KIP-455); empty lists
// are dropped, so a partition is in Adding or Removing only while it is
// being reassigned. A partition of adding or removing that is not in
// partitions is refused, as Kafka's TopicZNode.decode refuses it.
func decodeTopicAssignmentFull(topic string, data []byte) (fullAssignment, error) {
	var t topicAssignment
	if err := json.Unmarshal(data, &t); err != nil {
		return fullAssignment{}, decodeErr(topicPath(topic), err)
	}
	if t.Partitions == nil {
		return fullAssignment{}, decodeErr(topicPath(topic), errors.New("no partitions"))
	}
	a := fullAssignment{Replicas: t.Partitions, Adding: map[int32][]int32{}, Removing: map[int32][]int32{}}
	for _, x := range []struct {
		from partitionReplicas
		to   map[int32][]int32
	}{{t.AddingReplicas, a.Adding}, {t.RemovingReplicas, a.Removing}} {
		for p, rs := range x.from {
			if len(rs) == 0 {
				continue
			}
			if _, ok := t.Partitions[p]; !ok {
				return fullAssignment{}, decodeErr(topicPath(topic), fmt.Errorf("partition %d reassigned but not assigned", p))
			}
			x.to[p] = rs
		}
	}
	return a, nil
}

// encodeTopicAssignmentFull writes a version 2 topic znode with the
// reassignment state of a.
func encodeTopicAssignmentFull(a fullAssignment) []byte {
	t := topicAssignment{
		Version:          2,
		Partitions:       partitionReplicas(a.Replicas),
		AddingReplicas:   partitionReplicas{},
		RemovingReplicas: partitionReplicas{},
	}
	for p, rs := range a.Adding {
		if len(rs) > 0 {
			t.AddingReplicas[p] = rs
		}
	}
	for p, rs := range a.Removing {
		if len(rs) > 0 {
			t.RemovingReplicas[p] = rs
		}
	}
	return marshal(t)
}

// ---- /admin/reassign_partitions ----

// legacyReassignment is the payload of /admin/reassign_partitions (ZkData
// ReassignPartitionsZNode), written by 2.x kafka-reassign-partitions.sh.
type legacyReassignment struct {
	Version    int                           `json:"version"`
	Partitions []legacyReassignmentPartition `json:"partitions"`
}

type legacyReassignmentPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

func encodeLegacyReassignment(m map[cluster.TopicPartition][]int32) []byte {
	r := legacyReassignment{Version: 1, Partitions: []legacyReassignmentPartition{}}
	tps := make([]cluster.TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return compareTP(tps[i], tps[j]) < 0 })
	for _, tp := range tps {
		r.Partitions = append(r.Partitions, legacyReassignmentPartition{Topic: tp.Topic, Partition: tp.Partition, Replicas: m[tp]})
	}
	return marshal(r)
}

func decodeLegacyReassignment(data []byte) (map[cluster.TopicPartition][]int32, error) {
	var r legacyReassignment
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, decodeErr(reassignPartitionsPath, err)
	}
	out := make(map[cluster.TopicPartition][]int32, len(r.Partitions))
	for _, p := range r.Partitions {
		out[cluster.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Replicas
	}
	return out, nil
}

// ---- /admin/preferred_replica_election ----

// preferredElection is the payload of /admin/preferred_replica_election
// (ZkData PreferredReplicaElectionZNode), written by 2.x
// kafka-preferred-replica-election.sh.
type preferredElection struct {
	Version    int                  `json:"version"`
	Partitions []isrChangePartition `json:"partitions"`
}

func decodePreferredElection(data []byte) ([]cluster.TopicPartition, error) {
	var e preferredElection
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, decodeErr(preferredReplicaElectionPath, err)
	}
	out := make([]cluster.TopicPartition, 0, len(e.Partitions))
	for _, p := range e.Partitions {
		out = append(out, cluster.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return out, nil
}

func encodePreferredElection(tps []cluster.TopicPartition) []byte {
	e := preferredElection{Version: 1, Partitions: make([]isrChangePartition, 0, len(tps))}
	for _, tp := range tps {
		e.Partitions = append(e.Partitions, isrChangePartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return marshal(e)
}

// ---- /brokers/topics/<t>/partitions/<p>/state ----

// partitionState is the payload of a partition state znode (ZkData
// TopicPartitionStateZNode). leader is -1 for none and -2 during deletion.
type partitionState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Isr             []int32 `json:"isr"`
}

func encodePartitionState(s cluster.LeaderAndIsr) []byte {
	isr := s.Isr
	if isr == nil {
		isr = []int32{}
	}
	return marshal(partitionState{
		ControllerEpoch: s.ControllerEpoch,
		Leader:          s.Leader,
		Version:         1,
		LeaderEpoch:     s.LeaderEpoch,
		Isr:             isr,
	})
}

// decodePartitionState parses a state znode; zkVersion is its stat version.
// Unknown fields (leader_recovery_state of 3.2+) are ignored; the four
// fields Kafka requires must be present.
func decodePartitionState(data []byte, zkVersion int32) (cluster.LeaderAndIsr, error) {
	var s struct {
		ControllerEpoch *int32  `json:"controller_epoch"`
		Leader          *int32  `json:"leader"`
		LeaderEpoch     *int32  `json:"leader_epoch"`
		Isr             []int32 `json:"isr"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return cluster.LeaderAndIsr{}, decodeErr("partition state", err)
	}
	if s.ControllerEpoch == nil || s.Leader == nil || s.LeaderEpoch == nil || s.Isr == nil {
		return cluster.LeaderAndIsr{}, decodeErr("partition state", errors.New("missing controller_epoch, leader, leader_epoch or isr"))
	}
	return cluster.LeaderAndIsr{
		Leader:          *s.Leader,
		LeaderEpoch:     *s.LeaderEpoch,
		Isr:             s.Isr,
		ControllerEpoch: *s.ControllerEpoch,
		ZkVersion:       zkVersion,
	}, nil
}

// ---- /config/topics/<t> and /config/changes/config_change_<seq> ----

// topicConfig is the payload of /config/topics/<t> (ZkData ConfigEntityZNode).
type topicConfig struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

func encodeTopicConfig(cfg map[string]string) []byte {
	if cfg == nil {
		cfg = map[string]string{}
	}
	return marshal(topicConfig{Version: 1, Config: cfg})
}

func decodeTopicConfig(topic string, data []byte) (map[string]string, error) {
	var c topicConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, decodeErr(configTopicPath(topic), err)
	}
	if c.Config == nil {
		c.Config = map[string]string{}
	}
	return c.Config, nil
}

// configChangeNotification is the payload of /config/changes/config_change_<seq>
// (ZkData ConfigEntityChangeNotificationSequenceZNode), version 2.
type configChangeNotification struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

func encodeTopicConfigChange(topic string) []byte {
	return marshal(configChangeNotification{Version: 2, EntityPath: "topics/" + topic})
}

// ---- /cluster/id ----

// clusterIDData is the payload of /cluster/id; version is a string here.
type clusterIDData struct {
	Version string `json:"version"`
	ID      string `json:"id"`
}

func encodeClusterID(id string) []byte { return marshal(clusterIDData{Version: "1", ID: id}) }

func decodeClusterID(data []byte) (string, error) {
	var c clusterIDData
	if err := json.Unmarshal(data, &c); err != nil {
		return "", decodeErr(clusterIDPath, err)
	}
	if c.ID == "" {
		return "", decodeErr(clusterIDPath, errors.New("no id"))
	}
	return c.ID, nil
}

// newClusterID returns a random (version 4) UUID as 22 characters of
// unpadded base64url, as Kafka's CoreUtils.generateUuidAsBase64 does.
func newClusterID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(fmt.Sprintf("zkcoord: crypto/rand: %v", err))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// ---- /isr_change_notification/isr_change_<seq> ----

type isrChangePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// isrChangeNotification is the payload of one ISR change notification.
type isrChangeNotification struct {
	Version    int                  `json:"version"`
	Partitions []isrChangePartition `json:"partitions"`
}

func encodeIsrChangeNotification(tps []cluster.TopicPartition) []byte {
	n := isrChangeNotification{Version: 1, Partitions: make([]isrChangePartition, 0, len(tps))}
	for _, tp := range tps {
		n.Partitions = append(n.Partitions, isrChangePartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return marshal(n)
}

func decodeIsrChangeNotification(data []byte) ([]cluster.TopicPartition, error) {
	var n isrChangeNotification
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, decodeErr("isr change notification", err)
	}
	out := make([]cluster.TopicPartition, 0, len(n.Partitions))
	for _, p := range n.Partitions {
		out = append(out, cluster.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return out, nil
}

// ---- /latest_producer_id_block ----

// producerIDBlock is the payload of /latest_producer_id_block (ProducerIdManager
// 2.x): block_start and block_end (inclusive) are decimal strings.
type producerIDBlock struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

func encodeProducerIDBlock(broker int32, start, end int64) []byte {
	return marshal(producerIDBlock{
		Version:    1,
		Broker:     broker,
		BlockStart: strconv.FormatInt(start, 10),
		BlockEnd:   strconv.FormatInt(end, 10),
	})
}

// decodeProducerIDBlock returns the block's first and last (inclusive) ids.
func decodeProducerIDBlock(data []byte) (start, end int64, err error) {
	var b producerIDBlock
	if err := json.Unmarshal(data, &b); err != nil {
		return 0, 0, decodeErr(latestProducerIDBlockPath, err)
	}
	start, err1 := strconv.ParseInt(b.BlockStart, 10, 64)
	end, err2 := strconv.ParseInt(b.BlockEnd, 10, 64)
	if err1 != nil || err2 != nil || end < start {
		return 0, 0, decodeErr(latestProducerIDBlockPath, fmt.Errorf("bad block %q..%q", b.BlockStart, b.BlockEnd))
	}
	return start, end, nil
}
