package protocol

import (
	"context"
	"fmt"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

// ControllerVerifier is implemented by a ControlPlane that can tell
// whether a controller id and epoch are the current controller's (zkcoord
// reads /controller and /controller_epoch). It returns an error wrapping
// cluster.ErrStaleControllerEpoch when they are not.
type ControllerVerifier interface {
	VerifyController(controllerID, controllerEpoch int32) error
}

// admitControl fences a controller request (LeaderAndIsr, StopReplica,
// UpdateMetadata) as Kafka does, and on success returns with controlSem
// held; the caller runs the request and then calls release.
//
//   - Registration: before this broker has registered (Config.BrokerEpoch()
//     is 0) no controller can have meant a request for this incarnation,
//     and Kafka reads none (its socket server starts after
//     registerBroker): cluster.ErrBrokerNotAvailable, whatever epoch the
//     request carries. The controller retries that code, so a controller
//     that saw the registration before this broker learnt its epoch gets
//     through on a later attempt; STALE_BROKER_EPOCH would drop the request.
//   - Broker epoch (KIP-380): a request that carries one (hasBrokerEpoch)
//     other than -1, older than Config.BrokerEpoch(), was meant for an
//     earlier incarnation of this broker: cluster.ErrStaleBrokerEpoch. A
//     newer one is accepted, because the controller can learn the epoch
//     from ZooKeeper before this broker does (KafkaApis
//     isBrokerEpochStale).
//   - Controller epoch: older than the highest seen is a deposed
//     controller: cluster.ErrStaleControllerEpoch. Otherwise the epoch is
//     adopted.
func (s *Server) admitControl(ctx context.Context, rc *reqContext, controllerID, controllerEpoch int32, brokerEpoch int64, hasBrokerEpoch bool) (release func(), err error) {
	// ClusterAction first, as Kafka's handlers: a client's invented
	// controller request must not even adopt its epoch.
	if !s.authorizeCluster(rc, security.OpClusterAction) {
		return nil, errClusterAuthorizationFailed
	}
	if s.cfg.BrokerEpoch != nil {
		cur := s.cfg.BrokerEpoch()
		if cur <= 0 {
			s.log.Warn().Str("remote_addr", rc.remoteAddr).Int32("controller_id", controllerID).
				Int64("broker_epoch", brokerEpoch).Msg("refusing controller request before this broker registered")
			return nil, fmt.Errorf("broker not registered yet: %w", cluster.ErrBrokerNotAvailable)
		}
		if hasBrokerEpoch && brokerEpoch != -1 && brokerEpoch < cur {
			s.log.Warn().Str("remote_addr", rc.remoteAddr).Int32("controller_id", controllerID).
				Int64("broker_epoch", brokerEpoch).Int64("current_broker_epoch", cur).
				Msg("refusing controller request for an older broker epoch")
			return nil, fmt.Errorf("broker epoch %d, current %d: %w", brokerEpoch, cur, cluster.ErrStaleBrokerEpoch)
		}
	}
	// A ControlPlane that can check the sender against ZooKeeper does so
	// before the epoch is adopted: an invented, higher epoch from a plain
	// client would otherwise fence the real controller out.
	if v, ok := s.cfg.ControlPlane.(ControllerVerifier); ok {
		if err := v.VerifyController(controllerID, controllerEpoch); err != nil {
			s.log.Warn().Err(err).Str("remote_addr", rc.remoteAddr).Int32("controller_id", controllerID).
				Int32("controller_epoch", controllerEpoch).Msg("refusing controller request not from the current controller")
			return nil, err
		}
	}
	select {
	case s.controlSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release = func() { <-s.controlSem }
	if controllerEpoch < s.controllerEpoch {
		cur := s.controllerEpoch
		release()
		s.log.Warn().Str("remote_addr", rc.remoteAddr).Int32("controller_id", controllerID).
			Int32("controller_epoch", controllerEpoch).Int32("current_controller_epoch", cur).
			Msg("refusing request from a deposed controller")
		return nil, fmt.Errorf("controller %d epoch %d, current %d: %w", controllerID, controllerEpoch, cur, cluster.ErrStaleControllerEpoch)
	}
	s.controllerEpoch = controllerEpoch
	return release, nil
}

// securityProtocols are Kafka's security protocol ids, as UpdateMetadata
// carries them; the index is the id.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

func securityProtocolID(name string) int16 {
	for i, n := range securityProtocols {
		if n == name {
			return int16(i)
		}
	}
	return 0 // PLAINTEXT, the only protocol this broker serves
}

func securityProtocolName(id int16) string {
	if id >= 0 && int(id) < len(securityProtocols) {
		return securityProtocols[id]
	}
	return fmt.Sprintf("UNKNOWN_%d", id)
}

// int32s returns x, or nil when it is empty, so that decoded values
// compare equal to sent ones whatever the encoding made of an empty array.
func int32s(x []int32) []int32 {
	if len(x) == 0 {
		return nil
	}
	return x
}

// topicOrder groups items by topic, keeping topics in order of first
// appearance and items in their order within each topic.
func topicOrder[T any](items []T, topic func(T) string) (topics []string, byTopic map[string][]T) {
	byTopic = make(map[string][]T)
	for _, it := range items {
		t := topic(it)
		if _, ok := byTopic[t]; !ok {
			topics = append(topics, t)
		}
		byTopic[t] = append(byTopic[t], it)
	}
	return topics, byTopic
}
