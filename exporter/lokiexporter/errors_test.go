package lokiexporter

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/consumer/consumererror"
)

func TestRejectReasons(t *testing.T) {
	body := `entry for stream '{service_name="model"}' has timestamp too old: 2024-01-01T00:00:00Z, oldest acceptable timestamp is: 2024-05-01T00:00:00Z
entry for stream '{service_name="model"}' has timestamp too old: 2024-01-01T00:00:01Z, oldest acceptable timestamp is: 2024-05-01T00:00:00Z
max entry size 262144 bytes exceeded for stream '{service_name="model"}' while adding an entry with length 300000 bytes
user=fake, total ignored: 3 out of 10`
	assert.Equal(t, []string{reasonTooOld, reasonLineTooLong}, rejectReasons(body))

	for body, want := range map[string]string{
		`error parsing labels '{a="}' with error: unexpected EOF`:                     reasonInvalidLabels,
		"error at least one label pair is required per stream":                        reasonMissingLabels,
		"entry too far behind, entry timestamp is: x, oldest acceptable timestamp is": reasonTooFarBehind,
		"entry with timestamp x ignored, reason: 'entry out of order' for stream: {}": reasonTooFarBehind,
		"entry for stream '{a=\"b\"}' has timestamp too new: 2030-01-01":              reasonTooFarInFuture,
		"entry for stream '{…}' has 16 label names; limit 15":                         reasonMaxLabelNames,
		"stream '{…}' has label name too long: 'x'":                                   reasonLabelNameTooLong,
		"stream '{…}' has label value too long: 'x'":                                  reasonLabelValueTooLong,
		"stream '{…}' has duplicate label name: 'a'":                                  reasonDuplicateLabelNames,
		"stream '{…}' includes structured metadata, but this feature is disallowed":   reasonStructuredMetadata,
		"something new": reasonOther,
		"":              reasonOther,
	} {
		assert.Equal(t, []string{want}, rejectReasons(body), body)
	}
}

func TestClassify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	throttled := func(h http.Header) time.Duration {
		_, err := classify(http.StatusTooManyRequests, h, "rate limited", now)
		assert.False(t, consumererror.IsPermanent(err))
		return retryDelay(err)
	}
	assert.Equal(t, 7*time.Second, throttled(http.Header{"Retry-After": {"7"}}))
	assert.Equal(t, 30*time.Second, throttled(http.Header{"Retry-After": {now.Add(30 * time.Second).UTC().Format(http.TimeFormat)}}))
	assert.Equal(t, time.Duration(-1), throttled(http.Header{}), "no Retry-After: a plain retry with backoff")
	assert.Equal(t, time.Duration(-1), throttled(http.Header{"Retry-After": {"soon"}}))

	reasons, err := classify(http.StatusServiceUnavailable, http.Header{"Retry-After": {"3"}}, "", now)
	assert.Equal(t, 3*time.Second, retryDelay(err))
	assert.Nil(t, reasons)
	_, err = classify(http.StatusBadGateway, http.Header{}, "", now)
	assert.False(t, consumererror.IsPermanent(err))

	for status, reason := range map[int]string{
		http.StatusBadRequest:            reasonOther,
		http.StatusUnauthorized:          reasonUnauthorized,
		http.StatusForbidden:             reasonUnauthorized,
		http.StatusRequestEntityTooLarge: reasonRequestBodyTooLarge,
		http.StatusNotFound:              reasonOther,
	} {
		reasons, err := classify(status, http.Header{}, "no", now)
		assert.True(t, consumererror.IsPermanent(err), "status %d", status)
		assert.Equal(t, []string{reason}, reasons, "status %d", status)
	}
}

// retryDelay returns the delay of exporterhelper's throttle error, whose type is
// internal but whose message is "Throttle (7s), error: …"; -1 if err is none.
func retryDelay(err error) time.Duration {
	_, rest, ok := strings.Cut(err.Error(), "Throttle (")
	if !ok {
		return -1
	}
	text, _, _ := strings.Cut(rest, ")")
	d, parseErr := time.ParseDuration(text)
	if parseErr != nil {
		return -1
	}
	return d.Round(time.Second)
}
