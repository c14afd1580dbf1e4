package storetest

import "testing"

// TestUsersIsFresh: a test that changes the suite's users changes them for
// itself only.
func TestUsersIsFresh(t *testing.T) {
	u := Users()
	if len(u) != 3 || u["user-a"].TenantID != "tenant-a" || u["user-b"].TenantID != "tenant-b" {
		t.Fatalf("users %v; want user-a and user-c in tenant-a, user-b in tenant-b", u)
	}
	delete(u, "user-a")
	if _, ok := Users()["user-a"]; !ok {
		t.Fatal("deleting from one Users() removed user-a from the next")
	}
}
