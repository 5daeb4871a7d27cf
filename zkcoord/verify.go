package zkcoord

import (
	"fmt"

	"github.com/kafkazk/broker/cluster"
)

// VerifyController checks that a controller request really comes from the
// current controller: controllerID must be the broker named in /controller
// and controllerEpoch the value of /controller_epoch. Kafka without an
// authorizer trusts any sender; here a request with an invented, higher
// epoch would otherwise be adopted and fence the real controller out. The
// cached view is tried first; on a mismatch ZooKeeper is read directly,
// because a newly elected controller may reach this broker before its
// /controller watch fires. A mismatch returns an error wrapping
// cluster.ErrStaleControllerEpoch.
func (s *Session) VerifyController(controllerID, controllerEpoch int32) error {
	if s.ControllerID() == controllerID && s.ControllerEpoch() == controllerEpoch {
		return nil
	}
	data, _, err := s.zk.Get(controllerPath)
	if err != nil {
		return fmt.Errorf("verify controller %d: get %s: %w", controllerID, controllerPath, err)
	}
	id, err := decodeController(data)
	if err != nil {
		return fmt.Errorf("verify controller %d: %w", controllerID, err)
	}
	epoch, _, err := s.readControllerEpoch(false)
	if err != nil {
		return fmt.Errorf("verify controller %d: %w", controllerID, err)
	}
	if id != controllerID || epoch != controllerEpoch {
		return fmt.Errorf("request from controller %d with epoch %d, but /controller names %d with epoch %d: %w",
			controllerID, controllerEpoch, id, epoch, cluster.ErrStaleControllerEpoch)
	}
	return nil
}
