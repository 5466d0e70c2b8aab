package scale

import "testing"

func atSize(b *testing.B) []string { return nil }
