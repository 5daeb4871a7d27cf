package protocol

// DeleteTopics (key 20), versions 0-6.
//
//   - v0-v5 name topics in TopicNames; v6 in Topics, each with a name or a
//     topic id. This broker has no topic ids: a non-zero id answers
//     UNKNOWN_TOPIC_ID (100), an entry with neither INVALID_REQUEST.
//   - Each name goes to Admin.DeleteTopic under TimeoutMillis; errors map
//     through the error table (UNKNOWN_TOPIC_OR_PARTITION,
//     NOT_CONTROLLER, ...). ErrorMessage from v5.
//   - A topic marked for deletion is answered once it has left the
//     metadata this broker serves (Kafka's DelayedDeleteTopics), woken by
//     the metadata's changes, so a client that deletes and then asks for
//     metadata no longer sees it; still there at timeout_ms it answers
//     REQUEST_TIMED_OUT (the deletion goes on). timeout_ms <= 0 answers
//     REQUEST_TIMED_OUT at once, as Kafka's AdminManager.deleteTopics.
//   - Authorization: Delete on each topic, else TOPIC_AUTHORIZATION_FAILED
//     and the topic stays.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDeleteTopics(ctx context.Context, rc *reqContext, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	actx, cancel := adminTimeout(ctx, req.TimeoutMillis)
	defer cancel()

	topics := req.Topics
	if req.Version < 6 {
		topics = make([]kmsg.DeleteTopicsRequestTopic, 0, len(req.TopicNames))
		for i := range req.TopicNames {
			topics = append(topics, kmsg.DeleteTopicsRequestTopic{Topic: &req.TopicNames[i]})
		}
	}
	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, 0, len(topics))
	deleted := map[int]string{} // index in resp.Topics -> topic to wait for
	deletable := s.filterAuthorized(rc, security.OpDelete, security.ResourceTopic, logDenied)
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		var err error
		switch {
		case t.TopicID != [16]byte{}:
			rt.ErrorCode = kerr.UnknownTopicID.Code
			err = errors.New("this broker has no topic ids")
		case t.Topic == nil:
			rt.ErrorCode = kerr.InvalidRequest.Code
			err = errors.New("neither topic name nor topic id given")
		case !deletable(*t.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			err = errTopicAuthorization
		default:
			if err = s.cfg.Admin.DeleteTopic(actx, *t.Topic); err != nil {
				rt.ErrorCode = s.errorCode(rc, err)
			} else {
				requestEvent(s.log.Info(), rc).Str("topic", *t.Topic).Msg("deleted topic")
				deleted[len(resp.Topics)] = *t.Topic
			}
		}
		if err != nil && req.Version >= 5 {
			msg := err.Error()
			rt.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(deleted) == 0 {
		return resp, nil
	}
	if req.TimeoutMillis > 0 {
		s.awaitMetadata(actx, func() bool {
			for i, name := range deleted {
				if _, ok := s.cfg.Metadata.Topic(name); !ok {
					delete(deleted, i)
				}
			}
			return len(deleted) == 0
		})
	}
	for i := range deleted {
		resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
		if req.Version >= 5 {
			msg := "the topic is marked for deletion but still in this broker's metadata"
			resp.Topics[i].ErrorMessage = &msg
		}
	}
	return resp, nil
}
