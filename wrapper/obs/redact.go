package obs

import (
	"net/url"
	"regexp"
	"strings"
)

// Webhook and Pushgateway URLs carry secrets: Slack's and Discord's tokens
// are the tail of the path, others put a token in the query or userinfo.
// Everything trainrun prints about them (its warnings, retryablehttp's log
// lines, `trainrun policy show`) goes through RedactURLs.

var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// RedactURLs replaces every URL in s by RedactURL of it.
func RedactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, RedactURL)
}

// RedactURL keeps a URL's scheme, host, port and first path segment and
// replaces userinfo, the rest of the path, the query and the fragment by
// "***": https://u:p@hooks.slack.com/services/T0/B0/XYZ?k=v becomes
// https://***@hooks.slack.com/services/***?***.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		if i := strings.Index(raw, "://"); i >= 0 {
			return raw[:i+3] + "***"
		}
		return "***"
	}
	var b strings.Builder
	b.WriteString(u.Scheme + "://")
	if u.User != nil {
		b.WriteString("***@")
	}
	b.WriteString(u.Host)
	if p := strings.TrimPrefix(u.EscapedPath(), "/"); p != "" {
		first, rest, more := strings.Cut(p, "/")
		b.WriteString("/" + first)
		if more && rest != "" {
			b.WriteString("/***")
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?***")
	}
	if u.Fragment != "" {
		b.WriteString("#***")
	}
	return b.String()
}

// redacting wraps a printf-style log function so that every URL in what it
// prints is redacted (nil stays nil).
func redacting(logf func(string, ...any)) func(string, ...any) {
	if logf == nil {
		return nil
	}
	return func(format string, a ...any) {
		b := make([]any, len(a))
		for i, v := range a {
			switch v := v.(type) {
			case string:
				b[i] = RedactURLs(v)
			case error:
				b[i] = RedactURLs(v.Error())
			default:
				b[i] = v
			}
		}
		logf(RedactURLs(format), b...)
	}
}
