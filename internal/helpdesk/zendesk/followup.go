package zendesk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
)

// auditPageSize is the page[size] of the audits listing: Zendesk's most.
const auditPageSize = 100

// maxAuditPages bounds a lookup's pages (100 000 audits), so a listing
// that never ends fails the lookup instead of holding it until its
// deadline.
const maxAuditPages = 1000

// updateBody is the body of PUT /api/v2/tickets/{id}, fields in this
// order.
type updateBody struct {
	Ticket updateTicket `json:"ticket"`
}

type updateTicket struct {
	Status   string         `json:"status,omitempty"`
	Comment  *updateComment `json:"comment,omitempty"`
	Metadata updateMetadata `json:"metadata"`
}

type updateComment struct {
	Body   string `json:"body"`
	Public bool   `json:"public"`
}

type updateMetadata struct {
	Custom map[string]string `json:"custom"`
}

// UpdateBody is the exact body SendEffect sends for e (a comment or a
// close): the same bytes on every resend.
func UpdateBody(e delivery.Effect) ([]byte, error) {
	f, err := httpsend.ReadFollowup("zendesk", e)
	if err != nil {
		return nil, err
	}
	switch e.Kind {
	case httpsend.KindComment:
		return json.Marshal(updateBody{Ticket: updateTicket{Comment: &updateComment{Body: f.Body, Public: true},
			Metadata: updateMetadata{Custom: map[string]string{"comment_id": e.ID}}}})
	case httpsend.KindClose:
		t := updateTicket{Status: "solved", Metadata: updateMetadata{Custom: map[string]string{"close_id": e.ID}}}
		if f.Resolution != "" {
			t.Comment = &updateComment{Body: f.Resolution, Public: true}
		}
		return json.Marshal(updateBody{Ticket: t})
	}
	return nil, httpsend.UnsupportedKind("zendesk", e)
}

// metadataKey is the custom metadata key an effect's update carries its
// delivery key under.
func metadataKey(kind string) string {
	if kind == httpsend.KindClose {
		return "close_id"
	}
	return "comment_id"
}

// ticketNumber checks the Zendesk ticket id an effect follows.
func ticketNumber(e delivery.Effect) (string, error) {
	n, err := strconv.ParseUint(e.TicketExternalID, 10, 64)
	if err != nil || n == 0 {
		return "", &delivery.SendError{Failure: delivery.Refused,
			Err: fmt.Errorf("zendesk: %s effect %s: its ticket's Zendesk id %q is not a positive integer", e.Kind, e.ID, e.TicketExternalID)}
	}
	return strconv.FormatUint(n, 10), nil
}

// SendEffect makes a comment or a close as one update of the ticket, once.
// Zendesk takes no idempotency key on updates, so the update carries the
// delivery key in its custom metadata, where LookupEffect finds it. The
// receipt of a comment is its update's audit id; that of a close is the
// ticket's id (a close is a state of the ticket, and its lookup may find
// it by the ticket's status alone, without an audit).
func (c *Client) SendEffect(ctx context.Context, e delivery.Effect) (delivery.Receipt, error) {
	if e.Kind != httpsend.KindComment && e.Kind != httpsend.KindClose {
		return delivery.Receipt{}, httpsend.UnsupportedKind("zendesk", e)
	}
	body, err := UpdateBody(e)
	if err != nil {
		return delivery.Receipt{}, err
	}
	id, err := ticketNumber(e)
	if err != nil {
		return delivery.Receipt{}, err
	}
	req := httpsend.Request{Method: http.MethodPut, URL: c.url("/api/v2/tickets/"+id, ""), Header: c.header(), Body: body}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return delivery.Receipt{}, err
	}
	if resp.Status == http.StatusNotFound && isRecordNotFound(resp.Body) {
		// The URL is Zendesk's and the ticket is gone (deleted): no
		// resend can deliver this effect.
		return delivery.Receipt{}, httpsend.StatusError(req, resp, delivery.Refused)
	}
	if se := httpsend.Classify(req, resp); se != nil {
		return delivery.Receipt{}, se
	}
	if e.Kind == httpsend.KindClose {
		return c.receipt(id), nil
	}
	var out struct {
		Audit *struct {
			ID json.Number `json:"id"`
		} `json:"audit"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.Audit == nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Status: resp.Status,
			Err: fmt.Errorf("zendesk: answer %d without a readable audit%s", resp.Status, httpsend.Scrub(httpsend.Excerpt(resp.Body), req.URL))}
	}
	audit, err := (zTicket{ID: out.Audit.ID}).idString()
	if err != nil {
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Status: resp.Status,
			Err: fmt.Errorf("zendesk: answer %d: audit %v", resp.Status, err)}
	}
	return delivery.Receipt{ExternalID: audit, ExternalURL: c.receipt(id).ExternalURL}, nil
}

// LookupEffect asks Zendesk whether it holds the effect. A comment: an
// audit of the ticket whose custom metadata carries its comment_id (every
// page of the listing is read). A close: the ticket's status solved or
// closed, or else an audit carrying its close_id (the ticket may have
// been reopened since). Receipts as SendEffect's.
func (c *Client) LookupEffect(ctx context.Context, e delivery.Effect) (delivery.Receipt, bool, error) {
	if err := httpsend.CheckLookupEffect("zendesk", e); err != nil {
		return delivery.Receipt{}, false, err
	}
	if e.Kind != httpsend.KindComment && e.Kind != httpsend.KindClose {
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", httpsend.UnsupportedKind("zendesk", e))
	}
	id, err := ticketNumber(e)
	if err != nil {
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", err)
	}
	if e.Kind == httpsend.KindClose {
		solved, err := c.solved(ctx, id)
		if err != nil {
			return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", err)
		}
		if solved {
			return c.receipt(id), true, nil
		}
	}
	audit, found, err := c.findAudit(ctx, id, metadataKey(e.Kind), e.ID)
	switch {
	case err != nil:
		return delivery.Receipt{}, false, fmt.Errorf("zendesk lookup: %w", err)
	case !found:
		return delivery.Receipt{}, false, nil
	case e.Kind == httpsend.KindClose:
		return c.receipt(id), true, nil
	}
	return delivery.Receipt{ExternalID: audit, ExternalURL: c.receipt(id).ExternalURL}, true, nil
}

// solved reads the ticket and reports whether its status is solved or
// closed.
func (c *Client) solved(ctx context.Context, id string) (bool, error) {
	req := httpsend.Request{Method: http.MethodGet, URL: c.url("/api/v2/tickets/"+id, ""), Header: c.header()}
	resp, err := c.http.Do(ctx, req)
	if err != nil {
		return false, err
	}
	if resp.Status != http.StatusOK {
		return false, httpsend.LookupError(req, resp)
	}
	var out struct {
		Ticket *struct {
			Status string `json:"status"`
		} `json:"ticket"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.Ticket == nil || out.Ticket.Status == "" {
		return false, &delivery.SendError{Failure: delivery.Unknown, Status: resp.Status,
			Err: fmt.Errorf("answer without a ticket's status%s", httpsend.Scrub(httpsend.Excerpt(resp.Body), req.URL))}
	}
	return out.Ticket.Status == "solved" || out.Ticket.Status == "closed", nil
}

// auditsPage is what we read of a page of the audits listing: cursor
// pagination (meta, links) or offset pagination (next_page).
type auditsPage struct {
	Audits *[]struct {
		ID       json.Number `json:"id"`
		Metadata struct {
			Custom json.RawMessage `json:"custom"`
		} `json:"metadata"`
	} `json:"audits"`
	Meta *struct {
		HasMore     bool   `json:"has_more"`
		AfterCursor string `json:"after_cursor"`
	} `json:"meta"`
	NextPage *string `json:"next_page"`
}

// findAudit reads every page of ticket id's audits, by cursor, for one
// whose custom metadata carries value under key, and returns its id.
func (c *Client) findAudit(ctx context.Context, id, key, value string) (string, bool, error) {
	path := "/api/v2/tickets/" + id + "/audits"
	query := "page%5Bsize%5D=" + strconv.Itoa(auditPageSize)
	seen := map[string]bool{}
	for range maxAuditPages {
		req := httpsend.Request{Method: http.MethodGet, URL: c.url(path, query), Header: c.header()}
		resp, err := c.http.Do(ctx, req)
		if err != nil {
			return "", false, err
		}
		if resp.Status != http.StatusOK {
			return "", false, httpsend.LookupError(req, resp)
		}
		bad := func(why string) error {
			return &delivery.SendError{Failure: delivery.Unknown, Status: resp.Status,
				Err: fmt.Errorf("audits of ticket %s: %s%s", id, why, httpsend.Scrub(httpsend.Excerpt(resp.Body), req.URL))}
		}
		var page auditsPage
		if err := json.Unmarshal(resp.Body, &page); err != nil || page.Audits == nil {
			return "", false, bad("answer without an audits list")
		}
		for _, a := range *page.Audits {
			if carries(a.Metadata.Custom, key, value) {
				audit, err := (zTicket{ID: a.ID}).idString()
				if err != nil {
					return "", false, bad("audit " + err.Error())
				}
				return audit, true, nil
			}
		}
		var next string
		switch {
		case page.Meta != nil && !page.Meta.HasMore:
			return "", false, nil
		case page.Meta != nil:
			if page.Meta.AfterCursor == "" {
				return "", false, bad("has_more without an after_cursor")
			}
			next = "page%5Bsize%5D=" + strconv.Itoa(auditPageSize) + "&page%5Bafter%5D=" + url.QueryEscape(page.Meta.AfterCursor)
		case page.NextPage == nil || *page.NextPage == "":
			return "", false, nil
		default:
			// Offset pagination: only the next page's query is taken, and
			// only from a link to this very listing, so the credentials
			// never go to another host.
			u, err := url.Parse(*page.NextPage)
			base := c.url(path, "")
			if err != nil || !strings.EqualFold(u.Host, base.Host) ||
				(u.Path != base.Path && u.Path != base.Path+".json") {
				return "", false, bad("next_page is not a page of this listing")
			}
			next = u.RawQuery
		}
		if seen[next] {
			return "", false, bad("the listing repeats a page")
		}
		seen[next] = true
		query = next
	}
	return "", false, &delivery.SendError{Failure: delivery.Unknown,
		Err: fmt.Errorf("audits of ticket %s: more than %d pages", id, maxAuditPages)}
}

// carries reports whether an audit's metadata.custom holds value under
// key: at its top level, where Zendesk keeps the metadata object an update
// sends, or under a "custom" object inside it, where it keeps the
// {"custom":{...}} object UpdateBody sends.
func carries(custom json.RawMessage, key, value string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(custom, &m) != nil {
		return false
	}
	var s string
	if json.Unmarshal(m[key], &s) == nil && s == value {
		return true
	}
	var inner map[string]json.RawMessage
	return json.Unmarshal(m["custom"], &inner) == nil && json.Unmarshal(inner[key], &s) == nil && s == value
}

// isRecordNotFound reports whether a 404's body is Zendesk's
// {"error":"RecordNotFound",...}: the ticket does not exist, as opposed
// to a URL that is not Zendesk's API.
func isRecordNotFound(body []byte) bool {
	var e struct {
		Error string `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error == "RecordNotFound"
}
