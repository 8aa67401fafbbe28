package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/queue"
)

// explainStuck logs where undelivered notifications are stuck, for a run that ends with messages lost or
// pending: the pending rows by user and status, and every partition the worker group has not consumed to
// its end, with its owner. It turns "584 lost" into "partition 7 of .normal: committed 40, end 112, owned by
// worker-5".
func (e *Env) explainStuck(ctx context.Context, msgs map[int64][]sim.SentMessage, lost []string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last []string
	for _, u := range e.Users {
		if ms := msgs[u.ChatID]; len(ms) > 0 {
			last = append(last, fmt.Sprintf("%s %.1fs", u.ID, time.Since(ms[len(ms)-1].Time).Seconds()))
		}
	}
	e.T.Logf("time since each chat's last message: %s", strings.Join(last, ", "))
	// What the first few users with lost messages did receive last: whether their lane is moving, and on what.
	shown := map[string]bool{}
	for _, tok := range lost {
		user := strings.Split(tok, "-")[2]
		if shown[user] || len(shown) == 3 {
			continue
		}
		shown[user] = true
		for _, u := range e.Users {
			if u.ID != user {
				continue
			}
			ms := msgs[u.ChatID]
			var tail []string
			for _, m := range ms[max(0, len(ms)-15):] {
				seq := m.Text
				if tok := tokenPattern.FindString(m.Text); tok != "" {
					seq = tok[strings.LastIndexByte(tok, '-')+1:]
				}
				tail = append(tail, fmt.Sprintf("%s@-%.1fs", seq, time.Since(m.Time).Seconds()))
			}
			e.T.Logf("%s lost e.g. %s; its chat's last receipts: %s", user, tok, strings.Join(tail, " "))
		}
	}
	if rows, err := e.pendingRows(ctx); err != nil {
		e.T.Logf("pending notifications: %v", err)
	} else {
		e.T.Logf("pending notifications by user (status, count, attempts, last error, oldest update):\n%s", rows)
	}
	if lag, err := e.groupLag(ctx); err != nil {
		e.T.Logf("worker group: %v", err)
	} else {
		e.T.Logf("partitions the worker group has not consumed to the end:\n%s", lag)
	}
	for _, w := range e.LiveWorkers() {
		if w.PprofAddr == "" {
			continue
		}
		status, body, err := get(ctx, "http://"+w.PprofAddr+"/debug/pprof/goroutine?debug=2")
		if err != nil || status != 200 {
			e.T.Logf("goroutines of %s: %v (status %d)", w.Name, err, status)
			continue
		}
		path := filepath.Join(filepath.Dir(w.Log), w.Name+".goroutines.txt")
		if err := os.WriteFile(path, body, 0o644); err == nil {
			e.T.Logf("goroutines of %s saved to %s", w.Name, path)
		}
	}
}

func (e *Env) pendingRows(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
		SELECT coalesce(user_id, 'chat ' || chat_id::text), status, count(*), max(attempts), max(last_error_code),
		       min(updated_at), bool_or(published_at IS NOT NULL)
		FROM notifications WHERE status IN ('queued', 'delivering', 'retrying')
		GROUP BY 1, 2 ORDER BY 3 DESC, 1 LIMIT 20`)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for rows.Next() {
		var user, status string
		var n, attempts, code int
		var oldest time.Time
		var republished bool
		if err := rows.Scan(&user, &status, &n, &attempts, &code, &oldest, &republished); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "  %s %s ×%d, attempts ≤ %d, last error %d, oldest update %s ago, republished %v\n",
			user, status, n, attempts, code, time.Since(oldest).Round(time.Second), republished)
	}
	return b.String(), rows.Err()
}

var clientIDLine = regexp.MustCompile(`client_id=(herald-worker-[0-9a-f]+)`)

func (e *Env) groupLag(ctx context.Context) (string, error) {
	// Which worker process is which group client: each logs its client id when it starts.
	names := map[string]string{}
	for _, w := range e.Workers {
		if b, err := os.ReadFile(w.Log); err == nil {
			for _, m := range clientIDLine.FindAllSubmatch(b, -1) {
				names[string(m[1])] = w.Name
			}
		}
	}
	client := &kafka.Client{Addr: kafka.TCP(e.Proxy.Addr()), Timeout: 10 * time.Second}
	topics := queue.TopicsFor(e.prefix)
	partitions := make([]int, e.Cfg.Partitions)
	for i := range partitions {
		partitions[i] = i
	}
	owner := map[string]string{}
	desc, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{workerGroup}})
	if err != nil {
		return "", err
	}
	state := ""
	for _, g := range desc.Groups {
		state = g.GroupState
		for _, m := range g.Members {
			name := names[m.ClientID]
			if name == "" {
				name = m.ClientID
			}
			for _, t := range m.MemberAssignments.Topics {
				for _, p := range t.Partitions {
					owner[fmt.Sprintf("%s[%d]", t.Topic, p)] += name + " "
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  group %s is %s\n", workerGroup, state)
	for _, topic := range []string{topics.High, topics.Normal} {
		committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: workerGroup, Topics: map[string][]int{topic: partitions}})
		if err != nil {
			return "", err
		}
		reqs := make([]kafka.OffsetRequest, len(partitions))
		for i, p := range partitions {
			reqs[i] = kafka.LastOffsetOf(p)
		}
		ends, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
		if err != nil {
			return "", err
		}
		end := map[int]int64{}
		for _, po := range ends.Topics[topic] {
			end[po.Partition] = po.LastOffset
		}
		for _, c := range committed.Topics[topic] {
			if c.CommittedOffset < end[c.Partition] {
				key := fmt.Sprintf("%s[%d]", topic, c.Partition)
				fmt.Fprintf(&b, "  %s: committed %d, end %d (%d behind), owner %s\n",
					key, c.CommittedOffset, end[c.Partition], end[c.Partition]-c.CommittedOffset, strings.TrimSpace(owner[key]))
			}
		}
	}
	return b.String(), nil
}
