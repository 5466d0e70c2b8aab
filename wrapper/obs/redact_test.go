package obs

import (
	"fmt"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXXSECRET": "https://hooks.slack.com/services/***",
		"https://user:SECRETPASS@pg.example:9091":               "https://***@pg.example:9091",
		"http://pg:9091":                        "http://pg:9091",
		"http://pg:9091/":                       "http://pg:9091",
		"https://example.com/hook?token=SECRET": "https://example.com/hook?***",
		"https://discord.com/api/webhooks/123/SECRETTOKEN#frag": "https://discord.com/api/***#***",
		"https://x/%zz/SECRET": "https://***",
		`Post "https://hooks.slack.com/services/T/B/SECRET": EOF`: `Post "https://hooks.slack.com/services/***": EOF`,
	} {
		got := RedactURLs(in)
		if got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "SECRET") {
			t.Errorf("RedactURLs(%q) = %q keeps the secret", in, got)
		}
	}
}

// The notifier's log (its own warnings and retryablehttp's lines) redacts.
func TestRedactingLog(t *testing.T) {
	var got []string
	logf := redacting(func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) })
	leveled{warn: logf}.Error("request failed", "url", "https://hooks.slack.com/services/T/B/SECRET", "error", "Post \"https://a:SECRET@h/x\": EOF")
	logf("warning: webhook %s: %v", "https://h/hook?token=SECRET", "x")
	for _, l := range got {
		if strings.Contains(l, "SECRET") {
			t.Errorf("log line keeps a secret: %s", l)
		}
	}
	if redacting(nil) != nil {
		t.Error("redacting(nil) is not nil")
	}
}
