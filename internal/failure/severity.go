package failure

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// maxScan bounds how much of a body the severity parser reads: levels and
// their fields sit at the start of a line, stack traces within its first lines.
const maxScan = 4096

// severityOf is a log record's severity number: the number when set, else
// its severity text's, else the one its body shows (BodySeverity, and then
// fromBody is true).
func severityOf(lr plog.LogRecord) (n plog.SeverityNumber, fromBody bool) {
	if n := lr.SeverityNumber(); n != plog.SeverityNumberUnspecified {
		return n, false
	}
	if n, ok := LevelSeverity(lr.SeverityText()); ok {
		return n, false
	}
	n, _ = BodySeverity(lr.Body())
	return n, true
}

// BodySeverity reads a severity from a log body: a level field of a map body,
// else from its text (TextSeverity).
func BodySeverity(body pcommon.Value) (plog.SeverityNumber, bool) {
	switch body.Type() {
	case pcommon.ValueTypeStr:
		return TextSeverity(body.Str())
	case pcommon.ValueTypeMap:
		for _, key := range levelKeys {
			if v, ok := body.Map().Get(key); ok {
				if v.Type() == pcommon.ValueTypeInt {
					return numericLevel(v.Int())
				}
				if n, ok := LevelSeverity(v.AsString()); ok {
					return n, true
				}
			}
		}
	}
	return plog.SeverityNumberUnspecified, false
}

// levelKeys name the level field in JSON and logfmt logs: structlog, zap,
// slog, logrus, bunyan/pino, Python's logging (levelname), ECS (log.level).
var levelKeys = []string{"level", "lvl", "severity", "levelname", "log.level", "loglevel", "log_level", "severity_text"}

// TextSeverity reads a severity from a log line's text:
//   - a JSON object's or a logfmt line's level field ("level":"error", lvl=warn,
//     bunyan's numeric "level":50);
//   - a level word among the line's leading prefix tokens (timestamps, logger
//     names, brackets, separators), as Python's logging, log4j, slog text,
//     Apache and most printf-style loggers write it: "ERROR:root:...",
//     "2024-05-01 12:00:00,123 - engine - ERROR - ...", "[warn] ...";
//   - a glog/klog prefix ("E0501 12:00:00.123456 ...");
//   - a stack trace or panic anywhere in its first lines (Python, Java, Go).
//
// ok is false when the text shows none.
func TextSeverity(s string) (n plog.SeverityNumber, ok bool) {
	if len(s) > maxScan {
		s = s[:maxScan]
	}
	trimmed := strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(trimmed, "{") {
		n, ok = fieldLevel(trimmed, true)
	} else {
		n, ok = prefixLevel(trimmed)
		if !ok {
			n, ok = fieldLevel(trimmed, false)
		}
	}
	if (!ok || n < plog.SeverityNumberError) && stackTrace(s) {
		return plog.SeverityNumberError, true
	}
	return n, ok
}

// fieldLevel finds a level field: "key": value in JSON, key=value in logfmt.
func fieldLevel(s string, json bool) (plog.SeverityNumber, bool) {
	for _, key := range levelKeys {
		for from := 0; from < len(s); {
			i := strings.Index(s[from:], key)
			if i < 0 {
				break
			}
			i += from
			from = i + len(key)
			var value string
			var ok bool
			if json {
				value, ok = jsonValueAfter(s, i, len(key))
			} else {
				value, ok = logfmtValueAfter(s, i, len(key))
			}
			if !ok {
				continue
			}
			if n, ok := LevelSeverity(value); ok {
				return n, true
			}
			if num, ok := smallInt(value); ok {
				return numericLevel(num)
			}
		}
	}
	return plog.SeverityNumberUnspecified, false
}

// jsonValueAfter reads the value of the key at s[i:i+n] when it is a whole
// quoted key followed by a colon: a string's contents or a bare number.
func jsonValueAfter(s string, i, n int) (string, bool) {
	if i == 0 || s[i-1] != '"' || i+n >= len(s) || s[i+n] != '"' {
		return "", false
	}
	rest := strings.TrimLeft(s[i+n+1:], " \t")
	if !strings.HasPrefix(rest, ":") {
		return "", false
	}
	return value(strings.TrimLeft(rest[1:], " \t"), ",} \t\r\n")
}

// logfmtValueAfter reads the value of key=value when the key at s[i:i+n]
// starts a field.
func logfmtValueAfter(s string, i, n int) (string, bool) {
	if i > 0 && s[i-1] != ' ' && s[i-1] != '\t' || i+n >= len(s) || s[i+n] != '=' {
		return "", false
	}
	return value(s[i+n+1:], " \t\r\n")
}

// value reads a quoted string's contents, or a bare value up to one of ends.
func value(rest, ends string) (string, bool) {
	if strings.HasPrefix(rest, `"`) {
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return "", false
		}
		return rest[1 : 1+end], true
	}
	end := strings.IndexAny(rest, ends)
	if end < 0 {
		end = len(rest)
	}
	return rest[:end], true
}

// maxPrefixTokens bounds the tokens before a level word: a date, a time, a
// logger name, a thread and separators come before it in every common layout.
const maxPrefixTokens = 8

// prefixLevel finds a level word among the leading tokens of a line's
// prefix. It stops at the first token that reads as prose (a plain word that
// is not a level), so that "request done, no error" is not an error.
func prefixLevel(s string) (plog.SeverityNumber, bool) {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		s = s[:nl]
	}
	afterSeparator := false
	for t := 0; t < maxPrefixTokens && s != ""; t++ {
		s = strings.TrimLeft(s, " \t")
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		token := s[:end]
		s = s[end:]
		if n, ok := glogLevel(token); ok && t == 0 {
			return n, true
		}
		word := strings.Trim(token, "[]()<>{}|:-,;")
		// Python's default format: LEVEL:logger:message.
		if i := strings.IndexByte(word, ':'); i > 0 {
			word = word[:i]
		}
		if n, ok := LevelSeverity(word); ok && isLevelWord(word) {
			return n, true
		}
		// A plain word between separators is a field of the prefix (a
		// logger named "app" in "… - app - ERROR - …"); anywhere else it
		// is the message.
		if prose(token) && !afterSeparator {
			return plog.SeverityNumberUnspecified, false
		}
		afterSeparator = token == "-" || token == "|" || token == "::"
	}
	return plog.SeverityNumberUnspecified, false
}

// isLevelWord rejects level names written as prose inside a sentence: a
// level word in a prefix is all upper case, all lower case or bracketed.
func isLevelWord(w string) bool {
	return w == strings.ToUpper(w) || w == strings.ToLower(w)
}

// prose reports whether a token is a plain word (letters only, no
// punctuation that prefixes use) that ends the prefix.
func prose(token string) bool {
	if token == "" {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// glogLevel reads glog's and klog's prefix: a level letter and the date, "E0501".
func glogLevel(token string) (plog.SeverityNumber, bool) {
	if len(token) != 5 {
		return 0, false
	}
	for i := 1; i < 5; i++ {
		if token[i] < '0' || token[i] > '9' {
			return 0, false
		}
	}
	switch token[0] {
	case 'I':
		return plog.SeverityNumberInfo, true
	case 'W':
		return plog.SeverityNumberWarn, true
	case 'E':
		return plog.SeverityNumberError, true
	case 'F':
		return plog.SeverityNumberFatal, true
	}
	return 0, false
}

// stackTraces are the first lines of the stack traces of Python, Java and Go
// and of Go's panics.
var stackTraces = []string{"Traceback (most recent call last):", "Exception in thread \"", "\n\tat ", "\nCaused by: ",
	"panic: ", "goroutine 1 [running]:", "\ngoroutine "}

func stackTrace(s string) bool {
	for _, marker := range stackTraces {
		if strings.Contains(s, marker) {
			return true
		}
	}
	return false
}

// LevelSeverity maps a level name (any case; syslog, Python, Java and Go
// spellings) to the lowest severity number of its level.
func LevelSeverity(name string) (plog.SeverityNumber, bool) {
	if len(name) == 0 || len(name) > 9 {
		return plog.SeverityNumberUnspecified, false
	}
	var buf [9]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "TRACE", "FINEST", "FINER":
		return plog.SeverityNumberTrace, true
	case "DEBUG", "DBG", "FINE", "CONFIG":
		return plog.SeverityNumberDebug, true
	case "INFO", "INF", "NOTICE":
		return plog.SeverityNumberInfo, true
	case "WARN", "WARNING", "WRN":
		return plog.SeverityNumberWarn, true
	case "ERROR", "ERR", "SEVERE", "EXCEPTION":
		return plog.SeverityNumberError, true
	case "FATAL", "CRITICAL", "CRIT", "PANIC", "ALERT", "EMERG", "EMERGENCY", "DPANIC":
		return plog.SeverityNumberFatal, true
	}
	return plog.SeverityNumberUnspecified, false
}

// numericLevel maps bunyan's and pino's numeric levels (10 trace … 60 fatal).
func numericLevel(n int64) (plog.SeverityNumber, bool) {
	switch {
	case n >= 60:
		return plog.SeverityNumberFatal, true
	case n >= 50:
		return plog.SeverityNumberError, true
	case n >= 40:
		return plog.SeverityNumberWarn, true
	case n >= 30:
		return plog.SeverityNumberInfo, true
	case n >= 20:
		return plog.SeverityNumberDebug, true
	case n >= 10:
		return plog.SeverityNumberTrace, true
	}
	return plog.SeverityNumberUnspecified, false
}

func smallInt(s string) (int64, bool) {
	if s == "" || len(s) > 3 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// SeverityText is the canonical text of a severity number's level.
func SeverityText(n plog.SeverityNumber) string {
	switch {
	case n >= plog.SeverityNumberFatal:
		return "FATAL"
	case n >= plog.SeverityNumberError:
		return "ERROR"
	case n >= plog.SeverityNumberWarn:
		return "WARN"
	case n >= plog.SeverityNumberInfo:
		return "INFO"
	case n >= plog.SeverityNumberDebug:
		return "DEBUG"
	case n >= plog.SeverityNumberTrace:
		return "TRACE"
	}
	return ""
}
