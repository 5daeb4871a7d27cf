package protocol

// DeleteTopics (key 20), versions 0-6.
//
//   - v0-v5 name topics in TopicNames; v6 in Topics, each with a name or a
//     topic id. This broker has no topic ids: a non-zero id answers
//     UNKNOWN_TOPIC_ID (100), an entry with neither INVALID_REQUEST.
//   - Each name goes to Admin.DeleteTopic under TimeoutMillis; errors map
//     through the error table (UNKNOWN_TOPIC_OR_PARTITION,
//     NOT_CONTROLLER, ...). ErrorMessage from v5.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
		default:
			if err = s.cfg.Admin.DeleteTopic(actx, *t.Topic); err != nil {
				rt.ErrorCode = s.errorCode(rc, err)
			} else {
				requestEvent(s.log.Info(), rc).Str("topic", *t.Topic).Msg("deleted topic")
			}
		}
		if err != nil && req.Version >= 5 {
			msg := err.Error()
			rt.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
