package main

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkazk/broker/internal/clientconf"
)

// commandConfigOpts turns --command-config's client properties into kgo
// options (clientconf.Opts). An empty path is PLAINTEXT.
func commandConfigOpts(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	opts, err := clientconf.FileOpts(path, 5*time.Second)
	if err != nil {
		return nil, usageErrorf("--command-config: %v", err)
	}
	return opts, nil
}

// describeProtocol names what a target speaks, for messages.
func (tg target) String() string {
	if tg.commandConfig == "" {
		return tg.bootstrap
	}
	return fmt.Sprintf("%s (%s)", tg.bootstrap, tg.commandConfig)
}
