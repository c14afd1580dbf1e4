package fakehelpdesk

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// zAudit is one audit of a Zendesk ticket: the record of one create or
// update, with the custom metadata the update carried.
type zAudit struct {
	id, ticketID int64
	// custom is the update's "metadata" object as sent, which Zendesk
	// keeps as the audit's metadata.custom; "{}" for none.
	custom    json.RawMessage
	effectKey string // the comment_id or close_id custom carries, "" for none
	events    []map[string]any
	createdAt time.Time
	committed time.Time // on the fake clock, for lookup lag
	hidden    int       // listings still to answer without it
	hiddenIn  int       // the last listing that did not see it
}

func (a *zAudit) effectID() string { return a.effectKey }

// zendeskTicketPath splits /api/v2/tickets/{id}[.json][/rest] into the
// id and what follows it ("" or "audits").
func zendeskTicketPath(path string) (id, rest string) {
	p := strings.TrimPrefix(path, "/api/v2/tickets/")
	id, rest, _ = strings.Cut(p, "/")
	return strings.TrimSuffix(id, ".json"), strings.TrimSuffix(rest, ".json")
}

// zendeskTicketKind tells apart the requests on one ticket's URL.
func zendeskTicketKind(r *http.Request) Kind {
	_, rest := zendeskTicketPath(r.URL.Path)
	switch {
	case rest == "" && r.Method == http.MethodPut:
		return ZendeskUpdate
	case rest == "" && r.Method == http.MethodGet:
		return ZendeskShow
	case rest == "audits" && r.Method == http.MethodGet:
		return ZendeskAudits
	}
	return Other
}

// zUpdate is a ticket update as the fake reads it.
type zUpdate struct {
	Ticket *struct {
		Status  *string `json:"status"`
		Comment *struct {
			Body   string `json:"body"`
			Public *bool  `json:"public"`
		} `json:"comment"`
		Metadata json.RawMessage `json:"metadata"`
	} `json:"ticket"`
}

// effectKeys reads comment_id and close_id from an update's metadata,
// at its top level (as Zendesk's docs send custom metadata) or under
// "custom" (as this project's contract sends it).
func effectKeys(metadata json.RawMessage) (comment, closeID string) {
	var m struct {
		CommentID string `json:"comment_id"`
		CloseID   string `json:"close_id"`
		Custom    *struct {
			CommentID string `json:"comment_id"`
			CloseID   string `json:"close_id"`
		} `json:"custom"`
	}
	if json.Unmarshal(metadata, &m) != nil {
		return "", ""
	}
	comment, closeID = m.CommentID, m.CloseID
	if m.Custom != nil {
		if comment == "" {
			comment = m.Custom.CommentID
		}
		if closeID == "" {
			closeID = m.Custom.CloseID
		}
	}
	return comment, closeID
}

// zendeskUpdateKey is the key an update is scripted under: its comment_id,
// else its close_id.
func zendeskUpdateKey(body []byte) string {
	var u zUpdate
	if json.Unmarshal(body, &u) != nil || u.Ticket == nil {
		return ""
	}
	comment, closeID := effectKeys(u.Ticket.Metadata)
	if comment != "" {
		return comment
	}
	return closeID
}

// zTicketByID is the ticket whose Zendesk id is id, nil for none; s.mu is
// held.
func (s *Server) zTicketByID(id string) *zTicket {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil
	}
	for _, t := range s.zTickets {
		if t.id == n {
			return t
		}
	}
	return nil
}

// addAudit stores an audit of t carrying the update's metadata (nil for
// none), with the lookup lag in force; s.mu is held.
func (s *Server) addAudit(t *zTicket, metadata json.RawMessage, events ...map[string]any) *zAudit {
	now := s.nowLocked()
	if len(metadata) == 0 || string(metadata) == "null" {
		metadata = json.RawMessage(`{}`)
	}
	comment, closeID := effectKeys(metadata)
	s.zAuditID++
	a := &zAudit{id: 5000 + s.zAuditID, ticketID: t.id, custom: metadata, effectKey: comment + closeID,
		events: events, createdAt: now.UTC(), committed: now, hidden: s.lagN}
	s.zAudits = append(s.zAudits, a)
	return a
}

func (s *Server) auditJSON(a *zAudit) map[string]any {
	events := a.events
	if events == nil {
		events = []map[string]any{}
	}
	return map[string]any{"id": a.id, "ticket_id": a.ticketID, "author_id": 35436,
		"created_at": a.createdAt.Format(time.RFC3339),
		"metadata": map[string]any{"custom": a.custom,
			"system": map[string]any{"client": "fakehelpdesk", "ip_address": "127.0.0.1"}},
		"via": map[string]any{"channel": "api"}, "events": events}
}

var zStatuses = map[string]bool{"new": true, "open": true, "pending": true, "hold": true, "solved": true, "closed": true}

// zendeskFollowup answers an update, a ticket's show and its audits.
func (s *Server) zendeskFollowup(kind Kind, path, rawQuery, ctype string, body []byte) answer {
	id, _ := zendeskTicketPath(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.zTicketByID(id)
	if t == nil {
		return jsonAnswer(http.StatusNotFound, `{"error":"RecordNotFound","description":"Not found"}`)
	}
	switch kind {
	case ZendeskUpdate:
		return s.zendeskUpdate(t, ctype, body)
	case ZendeskShow:
		out, _ := json.Marshal(map[string]any{"ticket": s.zJSON(t)})
		return answer{status: http.StatusOK, ctype: "application/json", body: out}
	}
	return s.zendeskAudits(t, path, rawQuery)
}

// zendeskUpdate applies an update to t as Zendesk does: a closed ticket
// takes none (422), an update that changes nothing makes no audit (and
// so keeps no metadata), any other makes one audit with the update's
// metadata as its custom metadata. s.mu is held.
func (s *Server) zendeskUpdate(t *zTicket, ctype string, body []byte) answer {
	var u zUpdate
	if err := json.Unmarshal(body, &u); err != nil || u.Ticket == nil || !strings.HasPrefix(ctype, "application/json") {
		return jsonAnswer(http.StatusBadRequest, `{"error":"InvalidJSON"}`)
	}
	if t.status == "closed" {
		return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"RecordInvalid","description":"Record validation errors","details":{"status":[{"description":"Status: closed prevents ticket update"}]}}`)
	}
	in := u.Ticket
	if in.Status != nil && !zStatuses[*in.Status] {
		return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"RecordInvalid","description":"Record validation errors","details":{"status":[{"description":"Status: is not valid"}]}}`)
	}
	if in.Comment != nil && strings.TrimSpace(in.Comment.Body) == "" {
		return jsonAnswer(http.StatusUnprocessableEntity, `{"error":"RecordInvalid","description":"Record validation errors","details":{"base":[{"description":"Comment: cannot be blank"}]}}`)
	}
	var events []map[string]any
	if in.Comment != nil {
		public := in.Comment.Public == nil || *in.Comment.Public
		events = append(events, map[string]any{"id": 9000 + s.zAuditID, "type": "Comment", "body": in.Comment.Body, "public": public})
	}
	if in.Status != nil && *in.Status != t.status {
		events = append(events, map[string]any{"id": 9500 + s.zAuditID, "type": "Change", "field_name": "status",
			"value": *in.Status, "previous_value": t.status})
		t.status = *in.Status
	}
	out := map[string]any{}
	if len(events) > 0 {
		a := s.addAudit(t, in.Metadata, events...)
		comment, closeID := effectKeys(in.Metadata)
		switch {
		case comment != "":
			s.record(t.externalID, "comment:"+comment)
		case closeID != "":
			s.record(t.externalID, "close:"+closeID)
		default:
			s.record(t.externalID, "update")
		}
		out["audit"] = s.auditJSON(a)
	}
	out["ticket"] = s.zJSON(t)
	b, _ := json.Marshal(out)
	return answer{status: http.StatusOK, ctype: "application/json", body: b}
}

// zendeskAudits lists t's audits oldest first, as Zendesk does: with
// page[size], by cursor (meta.has_more, meta.after_cursor, links.next;
// page[after] continues), else by offset (page, per_page, next_page).
// No page holds more than Config.AuditPageSize audits. Audits hidden by
// the lookup lag are left out. s.mu is held.
func (s *Server) zendeskAudits(t *zTicket, path, rawQuery string) answer {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return jsonAnswer(http.StatusBadRequest, `{"error":"InvalidQuery"}`)
	}
	// The lag counts listings, not pages: a listing's first page uses up
	// the audits' hidden answers and numbers the listing; its later pages
	// (the number travels in the cursor, or next_page's "listing") leave
	// out what its first page did not see, so a listing sees one index.
	listing, after := 0, int64(0)
	if c := q.Get("page[after]"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		l, id, ok := strings.Cut(string(b), ":")
		if err == nil && ok {
			listing, err = strconv.Atoi(l)
			if err == nil {
				after, err = strconv.ParseInt(id, 10, 64)
			}
		}
		if err != nil || !ok {
			return jsonAnswer(http.StatusBadRequest, `{"error":"InvalidPaginationParameter","description":"page[after] is not a cursor"}`)
		}
	} else if n, err := strconv.Atoi(q.Get("listing")); err == nil {
		listing = n
	}
	if listing == 0 {
		s.zListings++
		listing = s.zListings
	}
	var list []*zAudit
	for _, a := range s.zAudits {
		if a.ticketID != t.id || a.hiddenIn == listing {
			continue
		}
		if s.visible(a.committed, &a.hidden) {
			list = append(list, a)
		} else {
			a.hiddenIn = listing
		}
	}
	base := s.srv.URL + path
	size := s.cfg.AuditPageSize
	if _, cursor := q["page[size]"]; cursor {
		if n, err := strconv.Atoi(q.Get("page[size]")); err == nil && n > 0 && n < size {
			size = n
		}
		page := []map[string]any{}
		more, last := false, int64(0)
		for _, a := range list {
			if a.id <= after {
				continue
			}
			if len(page) == size {
				more = true
				break
			}
			page = append(page, s.auditJSON(a))
			last = a.id
		}
		meta := map[string]any{"has_more": more, "after_cursor": nil, "before_cursor": nil}
		links := map[string]any{"next": nil, "prev": nil}
		if last != 0 {
			c := base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(listing) + ":" + strconv.FormatInt(last, 10)))
			meta["after_cursor"] = c
			if more {
				links["next"] = fmt.Sprintf("%s?page%%5Bsize%%5D=%d&page%%5Bafter%%5D=%s", base, size, c)
			}
		}
		out, _ := json.Marshal(map[string]any{"audits": page, "meta": meta, "links": links})
		return answer{status: http.StatusOK, ctype: "application/json", body: out}
	}
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 && n < size {
		size = n
	}
	pageNo := 1
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		pageNo = n
	}
	from := min((pageNo-1)*size, len(list))
	to := min(from+size, len(list))
	page := []map[string]any{}
	for _, a := range list[from:to] {
		page = append(page, s.auditJSON(a))
	}
	var next, prev any
	if to < len(list) {
		next = fmt.Sprintf("%s?page=%d&per_page=%d&listing=%d", base, pageNo+1, size, listing)
	}
	if pageNo > 1 {
		prev = fmt.Sprintf("%s?page=%d&per_page=%d&listing=%d", base, pageNo-1, size, listing)
	}
	out, _ := json.Marshal(map[string]any{"audits": page, "next_page": next, "previous_page": prev, "count": len(list)})
	return answer{status: http.StatusOK, ctype: "application/json", body: out}
}

// SetZendeskStatus sets the status of the Zendesk ticket whose id is id
// (as an agent or an automation would: "closed" makes it refuse every
// update), making no audit; it reports whether the ticket exists.
func (s *Server) SetZendeskStatus(id, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.zTicketByID(id)
	if t != nil {
		t.status = status
	}
	return t != nil
}

// ZendeskAuditCount is the number of audits of the Zendesk ticket whose
// id is id, hidden or not.
func (s *Server) ZendeskAuditCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.zTicketByID(id)
	n := 0
	for _, a := range s.zAudits {
		if t != nil && a.ticketID == t.id {
			n++
		}
	}
	return n
}
