package zkcoord

import (
	"strconv"

	"github.com/kafkazk/broker/security"
)

// This file is the only place that builds znode paths. Every path is
// relative to the chroot of zookeeper.connect; the chroot is added by zkConn
// on the way to the server and removed from watch events on the way back.

const (
	consumersPath                  = "/consumers"
	brokersPath                    = "/brokers"
	brokerIDsPath                  = "/brokers/ids"
	topicsPath                     = "/brokers/topics"
	brokerSeqIDPath                = "/brokers/seqid"
	configPath                     = "/config"
	configChangesPath              = "/config/changes"
	configTopicsPath               = "/config/topics"
	configClientsPath              = "/config/clients"
	configUsersPath                = "/config/users"
	configBrokersPath              = "/config/brokers"
	adminPath                      = "/admin"
	deleteTopicsRootPath           = "/admin/delete_topics"
	reassignPartitionsPath         = "/admin/reassign_partitions"
	preferredReplicaElectionPath   = "/admin/preferred_replica_election"
	isrChangeNotificationPath      = "/isr_change_notification"
	latestProducerIDBlockPath      = "/latest_producer_id_block"
	logDirEventNotificationPath    = "/log_dir_event_notification"
	controllerPath                 = "/controller"
	controllerEpochPath            = "/controller_epoch"
	clusterPath                    = "/cluster"
	clusterIDPath                  = "/cluster/id"
	delegationTokensPath           = "/delegation_token/tokens"
	configChangeNamePrefix         = "config_change_"
	configChangeSequencePrefix     = configChangesPath + "/" + configChangeNamePrefix
	isrChangeNotificationSeqPrefix = "/isr_change_notification/isr_change_"

	// ACL storage (ZkData ZkAclStore, ZkAclChangeStore).
	aclLiteralPath         = "/kafka-acl"
	aclExtendedPath        = "/kafka-acl-extended"
	aclChangesPath         = "/kafka-acl-changes"
	aclExtendedChangesPath = "/kafka-acl-extended-changes"
	aclChangeNamePrefix    = "acl_changes_"
)

// persistentPaths are the paths every broker creates at startup, in an order
// where parents come first (ZkData PersistentZkPaths; KZC createTopLevelPaths).
// All are persistent and empty; NODEEXISTS is ignored.
var persistentPaths = []string{
	consumersPath,
	brokersPath,
	brokerIDsPath,
	topicsPath,
	brokerSeqIDPath,
	configPath,
	configChangesPath,
	configTopicsPath,
	configClientsPath,
	configUsersPath,
	configBrokersPath,
	adminPath,
	deleteTopicsRootPath,
	isrChangeNotificationPath,
	latestProducerIDBlockPath,
	logDirEventNotificationPath,
}

// brokerPath is /brokers/ids/<id>, the ephemeral registration of one broker.
func brokerPath(id int32) string { return brokerIDsPath + "/" + strconv.Itoa(int(id)) }

// topicPath is /brokers/topics/<t>, the topic's replica assignment.
func topicPath(topic string) string { return topicsPath + "/" + topic }

// partitionsPath is /brokers/topics/<t>/partitions.
func partitionsPath(topic string) string { return topicPath(topic) + "/partitions" }

// partitionPath is /brokers/topics/<t>/partitions/<p>.
func partitionPath(topic string, p int32) string {
	return partitionsPath(topic) + "/" + strconv.Itoa(int(p))
}

// partitionStatePath is /brokers/topics/<t>/partitions/<p>/state, the
// partition's leader and ISR.
func partitionStatePath(topic string, p int32) string { return partitionPath(topic, p) + "/state" }

// configTopicPath is /config/topics/<t>, the topic's config overrides.
func configTopicPath(topic string) string { return configTopicsPath + "/" + topic }

// deleteTopicsPath is /admin/delete_topics/<t>, the request to delete t.
func deleteTopicsPath(topic string) string { return deleteTopicsRootPath + "/" + topic }

// configChangeNotificationPath is one child of /config/changes, by its name
// (config_change_<seq>).
func configChangeNotificationPath(name string) string { return configChangesPath + "/" + name }

// isrChangeNotificationNodePath is one child of /isr_change_notification,
// by its name (isr_change_<seq>).
func isrChangeNotificationNodePath(name string) string {
	return isrChangeNotificationPath + "/" + name
}

// aclStorePath is where the ACLs of one pattern type live: /kafka-acl for
// literal patterns, /kafka-acl-extended/<pattern type, lower case> for the
// others (only prefixed exists).
func aclStorePath(pt security.PatternType) string {
	if pt == security.PatternLiteral {
		return aclLiteralPath
	}
	return aclExtendedPath + "/" + pt.StoreName()
}

// aclTypePath is /kafka-acl/<ResourceType> (or its extended twin); the type
// segment is Kafka's camel-case name, "Topic", "TransactionalId".
func aclTypePath(pt security.PatternType, rt security.ResourceType) string {
	return aclStorePath(pt) + "/" + rt.String()
}

// aclResourcePath is the znode holding the ACLs of one resource pattern,
// /kafka-acl/Topic/orders or /kafka-acl-extended/prefixed/Topic/ord.
func aclResourcePath(p security.ResourcePattern) string {
	return aclTypePath(p.PatternType, p.Type) + "/" + p.Name
}

// aclChangeStorePath is where a pattern's change notifications go:
// /kafka-acl-changes for literal patterns, /kafka-acl-extended-changes for
// the others.
func aclChangeStorePath(pt security.PatternType) string {
	if pt == security.PatternLiteral {
		return aclChangesPath
	}
	return aclExtendedChangesPath
}

// aclChangeNodePath is one child of an ACL change store, by its name.
func aclChangeNodePath(store, name string) string { return store + "/" + name }

// configUserPath is /config/users/<sanitized user>, a user's SCRAM
// credentials (and quotas).
func configUserPath(sanitizedUser string) string { return configUsersPath + "/" + sanitizedUser }
