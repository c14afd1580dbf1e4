// Package docs holds the tests of the repository's documentation: the
// README stays a tour (at most 300 lines), every relative link of the
// README and of docs/*.md reaches a file of the repository (and a heading
// of it, when it names one), and the code docs/adding-a-tool.md shows is
// the code of the tool it points to. The examples the docs run are tested
// where they run: cmd/server/readme_test.go (the README's blocks against
// make run), internal/config (the configuration reference's defaults and
// every configuration example).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines bounds the README: what it is, how to run, try and
// deploy it, and a map of the rest.
const maxReadmeLines = 300

func TestReadmeIsATour(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines; at most %d: move the detail into docs/ and link it", n, maxReadmeLines)
	}
}

var (
	fence      = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRaw = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
)

// markdownFiles are the README and every page of docs/, relative to the
// repository's root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		files = append(files, filepath.Join("docs", p))
	}
	return files
}

// prose is text without its code blocks and code spans, where a link is
// only text.
func prose(text string) string {
	return codeSpan.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
}

// anchors are the ids GitHub gives the headings of a markdown text:
// lower case, punctuation dropped, spaces as hyphens, a repeat numbered.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRaw.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			seen[id]++
			id += "-" + strconv.Itoa(n)
		} else {
			seen[id] = 1
		}
		ids[id] = true
	}
	return ids
}

// TestLinksResolve: every relative link in the README and docs/ names a
// file inside the repository and, with a #fragment into a markdown file,
// one of its headings; no text points outside the repository.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	read := func(rel string) (string, bool) {
		if s, ok := texts[rel]; ok {
			return s, true
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", false
		}
		texts[rel] = string(b)
		return string(b), true
	}
	for _, file := range markdownFiles(t) {
		text, ok := read(file)
		if !ok {
			t.Fatalf("cannot read %s", file)
		}
		// A path named in the text, not only a link, is a file of the
		// repository: a reader has nothing above its root, nor beside it.
		for _, p := range upPath.FindAllString(text, -1) {
			rel := filepath.Join(filepath.Dir(file), p)
			if _, err := os.Stat(filepath.Join(root, rel)); rel == ".." || strings.HasPrefix(rel, "../") || err != nil {
				t.Errorf("%s names %s, which is not in the repository", file, p)
			}
		}
		for _, m := range link.FindAllStringSubmatch(prose(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			rel := file
			if path != "" {
				rel = filepath.Join(filepath.Dir(file), path)
			}
			if rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(path) {
				t.Errorf("%s: link %s leaves the repository", file, target)
				continue
			}
			info, err := os.Stat(filepath.Join(root, rel))
			if err != nil {
				t.Errorf("%s: link %s: no file %s in the repository", file, target, rel)
				continue
			}
			if fragment == "" || info.IsDir() || !strings.HasSuffix(rel, ".md") {
				continue
			}
			linked, _ := read(rel)
			if !anchors(linked)[fragment] {
				t.Errorf("%s: link %s: %s has no heading #%s", file, target, rel, fragment)
			}
		}
	}
}

// upPath is a relative path that climbs a folder, as a document names it.
var upPath = regexp.MustCompile(`(?:\.\./)+[\w.-]+`)

// TestAddingAToolShowsTheTool: the Go block docs/adding-a-tool.md shows
// is, byte for byte, in the file it names, which its tests drive through
// both doors.
func TestAddingAToolShowsTheTool(t *testing.T) {
	doc, err := os.ReadFile("adding-a-tool.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- note-go:begin -->\n```go\n")
	if !ok {
		t.Fatal("docs/adding-a-tool.md has no note-go block")
	}
	block, _, ok = strings.Cut(block, "\n```\n<!-- note-go:end -->")
	if !ok || strings.TrimSpace(block) == "" {
		t.Fatal("docs/adding-a-tool.md: the note-go block is not closed")
	}
	src, err := os.ReadFile("../internal/testkit/coretest/note.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), block) {
		t.Errorf("docs/adding-a-tool.md shows code that is not in internal/testkit/coretest/note.go; copy the tool's code again")
	}
}
