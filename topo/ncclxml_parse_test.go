package topo

import (
	"fmt"
	"regexp"
	"strings"
)

// A strict reader of NCCL topology XML, written from NCCL's grammar as
// src/graph/xml.cc implements it (topo-nccl.md §7): xmlGetChar/xmlGetToken/
// xmlGetNode/xmlLoadSub. It rejects what NCCL rejects and, in lint mode, what
// NCCL silently misreads.

type ncclElem struct {
	name     string
	attrs    [][2]string
	children []*ncclElem
	line     int
}

func (e *ncclElem) attr(k string) (string, bool) {
	for _, a := range e.attrs {
		if a[0] == k {
			return a[1], true
		}
	}
	return "", false
}

type ncclParser struct {
	s     string
	i     int
	line  int
	count int
}

func (p *ncclParser) errf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, a...))
}

func (p *ncclParser) peek() byte {
	if p.i >= len(p.s) {
		return 0
	}
	return p.s[p.i]
}

func (p *ncclParser) next() byte {
	c := p.peek()
	if c == '\n' {
		p.line++
	}
	p.i++
	return c
}

// skipSpace skips what xmlGetNode skips before '<': ' ', '\n', '\r' only.
func (p *ncclParser) skipSpace() {
	for {
		c := p.peek()
		if c == ' ' || c == '\n' || c == '\r' {
			p.next()
			continue
		}
		return
	}
}

// token reads a name: it ends at ' ', '>', '/', '\n', '\r', '=' (names may
// not contain quotes).
func (p *ncclParser) token() string {
	start := p.i
	for {
		c := p.peek()
		if c == 0 || c == ' ' || c == '>' || c == '/' || c == '\n' || c == '\r' || c == '=' || c == '\t' {
			return p.s[start:p.i]
		}
		p.next()
	}
}

// node reads one tag: returns the element (closing tag: name starting "/").
func (p *ncclParser) node() (*ncclElem, bool, error) {
	for {
		p.skipSpace()
		if p.peek() == 0 {
			return nil, false, nil
		}
		if c := p.peek(); c != '<' {
			return nil, false, p.errf("expecting '<', got %q", c)
		}
		if strings.HasPrefix(p.s[p.i:], "<!--") {
			end := strings.Index(p.s[p.i:], "-->")
			if end < 0 {
				return nil, false, p.errf("unterminated comment")
			}
			for k := 0; k < end+3; k++ {
				p.next()
			}
			continue
		}
		break
	}
	line := p.line
	p.next() // '<'
	closing := false
	if p.peek() == '/' {
		closing = true
		p.next()
	}
	name := p.token()
	if name == "" {
		return nil, false, p.errf("empty element name")
	}
	if strings.ContainsAny(name, "?!") {
		return nil, false, p.errf("element %q: NCCL reads '<?' and '<!' as element names and fails (no XML declaration)", name)
	}
	e := &ncclElem{name: name, line: line}
	if closing {
		e.name = "/" + name
		if c := p.next(); c != '>' {
			return nil, false, p.errf("expected >, got %q", c)
		}
		return e, false, nil
	}
	for {
		c := p.next()
		switch c {
		case '>':
			return e, false, nil
		case '/':
			if d := p.next(); d != '>' {
				return nil, false, p.errf("expected >, got %q", d)
			}
			return e, true, nil
		case ' ':
			k := p.token()
			if k == "" {
				return nil, false, p.errf("<%s>: empty attribute (two spaces, or a space before '>')", name)
			}
			if d := p.next(); d != '=' {
				return nil, false, p.errf("<%s %s>: expected '=', got %q (no spaces around '=')", name, k, d)
			}
			q := p.next()
			if q != '"' && q != '\'' {
				return nil, false, p.errf("<%s %s=>: expected a quote, got %q", name, k, q)
			}
			end := strings.IndexByte(p.s[p.i:], q)
			if end < 0 {
				return nil, false, p.errf("<%s %s=>: unterminated value", name, k)
			}
			v := p.s[p.i : p.i+end]
			if strings.ContainsAny(v, "\n\r") {
				return nil, false, p.errf("<%s %s=>: value spans lines", name, k)
			}
			if len(v) > 255 {
				return nil, false, p.errf("<%s %s=>: value longer than 255 characters", name, k)
			}
			for k := 0; k <= end; k++ {
				p.next()
			}
			e.attrs = append(e.attrs, [2]string{k, v})
			if len(e.attrs) > NCCLXMLMaxAttrs {
				return nil, false, p.errf("<%s>: more than %d attributes", name, NCCLXMLMaxAttrs)
			}
		default:
			return nil, false, p.errf("<%s>: expected >, got %q (attributes must stay on the element's line, separated by single spaces)", name, c)
		}
	}
}

// children reads elements until the closing tag of parent (or EOF at top level).
func (p *ncclParser) children(parent string) ([]*ncclElem, error) {
	var out []*ncclElem
	for {
		e, selfClosed, err := p.node()
		if err != nil {
			return nil, err
		}
		if e == nil {
			if parent != "" {
				return nil, p.errf("end of file inside <%s>", parent)
			}
			return out, nil
		}
		if strings.HasPrefix(e.name, "/") {
			if e.name[1:] != parent {
				return nil, p.errf("closing </%s> does not match <%s>", e.name[1:], parent)
			}
			return out, nil
		}
		p.count++
		if p.count > NCCLXMLMaxElements {
			return nil, p.errf("more than %d elements", NCCLXMLMaxElements)
		}
		if !selfClosed {
			if e.children, err = p.children(e.name); err != nil {
				return nil, err
			}
		}
		out = append(out, e)
	}
}

var (
	ncclBusID   = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	ncclHexAttr = regexp.MustCompile(`^0x[0-9a-f]+$`)
	ncclMask    = regexp.MustCompile(`^[0-9a-f]{8}(,[0-9a-f]{8})*$`)
)

// parseNCCLTopo reads a topology file with NCCL's grammar. With lint, it also
// rejects values NCCL accepts but misreads or fills from sysfs: upper-case
// or malformed bus ids, unknown link speeds, a <pci> without class or link
// attributes, a <cpu> without numaid, unknown arch/vendor.
func parseNCCLTopo(data []byte, lint bool) (*ncclElem, error) {
	s := string(data)
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		return nil, fmt.Errorf("line %d: tab character (NCCL: expecting '<', got '\\t')", strings.Count(s[:i], "\n")+1)
	}
	p := &ncclParser{s: s, line: 1}
	top, err := p.children("")
	if err != nil {
		return nil, err
	}
	if len(top) != 1 || top[0].name != "system" {
		return nil, fmt.Errorf("want exactly one top-level <system>, got %d elements", len(top))
	}
	sys := top[0]
	if v, _ := sys.attr("version"); v != "1" {
		return nil, fmt.Errorf("<system version=%q>: NCCL_TOPO_XML_VERSION is 1", v)
	}
	if !lint {
		return sys, nil
	}
	var walk func(e *ncclElem) error
	walk = func(e *ncclElem) error {
		at := func(k string) string { v, _ := e.attr(k); return v }
		switch e.name {
		case "cpu":
			if _, ok := e.attr("numaid"); !ok {
				return fmt.Errorf("line %d: <cpu> without numaid", e.line)
			}
			if v, ok := e.attr("affinity"); ok && !ncclMask.MatchString(v) {
				return fmt.Errorf("line %d: <cpu affinity=%q>: not a cpumask", e.line, v)
			}
			if v := at("arch"); v != "" && v != "x86_64" && v != "arm64" && v != "ppc64" {
				return fmt.Errorf("line %d: <cpu arch=%q>: NCCL knows x86_64, arm64, ppc64", e.line, v)
			}
			if at("vendor") == "GenuineIntel" && (at("familyid") == "" || at("modelid") == "") {
				return fmt.Errorf("line %d: Intel <cpu> needs familyid and modelid", e.line)
			}
		case "pci":
			b := at("busid")
			if !ncclBusID.MatchString(b) {
				return fmt.Errorf("line %d: <pci busid=%q>: want lower-case DDDD:BB:DD.F", e.line, b)
			}
			if c := at("class"); !ncclHexAttr.MatchString(c) {
				return fmt.Errorf("line %d: <pci busid=%q class=%q>: want 0x-prefixed lower-case hex", e.line, b, c)
			}
			ok := false
			for _, s := range NCCLLinkSpeeds {
				ok = ok || at("link_speed") == s
			}
			if !ok {
				return fmt.Errorf("line %d: <pci busid=%q link_speed=%q>: NCCL would assume Gen3", e.line, b, at("link_speed"))
			}
			if _, has := e.attr("link_width"); !has {
				return fmt.Errorf("line %d: <pci busid=%q> without link_width", e.line, b)
			}
		case "system", "gpu", "nic", "net", "nvlink", "c2c", "pcilink":
		default:
			return fmt.Errorf("line %d: unknown element <%s> (NCCL ignores it)", e.line, e.name)
		}
		for _, c := range e.children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return sys, walk(sys)
}
