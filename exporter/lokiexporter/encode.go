package lokiexporter

import (
	"strconv"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
)

// Encoding is the body format of a push.
type Encoding string

const (
	// EncodingProtobuf is a snappy-compressed push.PushRequest, Loki's native format.
	EncodingProtobuf Encoding = "protobuf"
	// EncodingJSON is Loki's JSON push format.
	EncodingJSON Encoding = "json"
)

func (e Encoding) contentType() string {
	if e == EncodingJSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// encoder reuses its buffers across pushes; not safe for concurrent use.
type encoder struct {
	encoding Encoding
	raw      []byte // the marshalled protobuf, before compression
	lastSize int    // the previous body's size, to size the next one
	req      push.PushRequest
}

// encode returns a new push body for streams. The body is not reused: the HTTP
// transport may still read it after the response has arrived.
func (e *encoder) encode(streams []*stream) ([]byte, error) {
	if e.encoding == EncodingJSON {
		body := appendJSONPush(make([]byte, 0, e.lastSize), streams)
		e.lastSize = len(body)
		return body, nil
	}
	e.req.Streams = e.req.Streams[:0]
	for _, st := range streams {
		e.req.Streams = append(e.req.Streams, push.Stream{Labels: st.key, Entries: st.entries})
	}
	if size := e.req.Size(); cap(e.raw) < size {
		e.raw = make([]byte, size)
	} else {
		e.raw = e.raw[:size]
	}
	n, err := e.req.MarshalToSizedBuffer(e.raw)
	clear(e.req.Streams) // do not keep the entries alive in the pool
	if err != nil {
		return nil, err
	}
	return snappy.Encode(nil, e.raw[len(e.raw)-n:]), nil
}

// appendJSONPush writes {"streams":[{"stream":{labels},"values":[["<unix ns>","<line>",{metadata}]]}]}.
func appendJSONPush(dst []byte, streams []*stream) []byte {
	dst = append(dst, `{"streams":[`...)
	for i, st := range streams {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"stream":{`...)
		for j, l := range st.labels {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, l.name)
			dst = append(dst, ':')
			dst = appendJSONString(dst, l.value)
		}
		dst = append(dst, `},"values":[`...)
		for j, e := range st.entries {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `["`...)
			dst = strconv.AppendInt(dst, e.Timestamp.UnixNano(), 10)
			dst = append(dst, `",`...)
			dst = appendJSONString(dst, e.Line)
			if len(e.StructuredMetadata) > 0 {
				dst = append(dst, ",{"...)
				for k, m := range e.StructuredMetadata {
					if k > 0 {
						dst = append(dst, ',')
					}
					dst = appendJSONString(dst, m.Name)
					dst = append(dst, ':')
					dst = appendJSONString(dst, m.Value)
				}
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}
