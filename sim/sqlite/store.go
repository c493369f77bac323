package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/sim"
	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Memory is the path that opens a throwaway in-memory store.
const Memory = ":memory:"

// Store is a sim.Store on SQLite.
type Store struct {
	db    *sql.DB
	path  string
	owner string
	// lock is held on a store file while it is open; nil in memory.
	lock *storeLock
	// noReturn are a store file's marks (sim.NoReturnMarks); nil in
	// memory, and when only read (OpenToRead).
	noReturn *noReturnMarks

	// schemaDone is closed once the schema is built; schemaErr says why it
	// could not be (an in-memory store's is built in the background).
	schemaDone chan struct{}
	schemaErr  error

	// writes are the statements the journal and the recorder run on every
	// change, prepared once (parsing them was most of a write's cost).
	prepOnce sync.Once
	prepErr  error
	writes   [numWrites]*sql.Stmt
	// timelineInserts and eventInserts insert 1 to insertRows rows in
	// one statement each.
	timelineInserts, eventInserts rowInserts

	// logLimits bound what is kept of each instance's output.
	logLimits LogLimits
	// check is the background PRAGMA quick_check of a store file, begun at
	// open: what it found (damage), and when it is over.
	check struct {
		mu      sync.Mutex
		damage  error
		done    chan struct{}
		stop    context.CancelFunc
		started bool
	}
	// frameLimits bound the frame records kept (SetFrameLimits).
	frameLimits FrameLimits
	// eventLimits bound each instance's events (SetEventLimits);
	// eventCounts say when to count them again (boundEvents), and
	// eventsTrimmed is what trims let go of.
	eventLimits   sim.EventLimits
	eventMu       sync.Mutex
	eventCounts   map[string]int64
	eventsTrimmed atomic.Int64
	// eventTotal is about how many events the table holds (guarded by
	// eventMu): exact once read (eventTotalRead), high after trims.
	eventTotal     int64
	eventTotalRead bool
	// migCap bounds the finished migrations kept (SetMigrationCap);
	// prunedIDs are those it dropped last, whose late writes go.
	migCap    migrationCap
	prunedIDs sim.RecentlyPruned
}

// write names one of the prepared writes.
type write int

const (
	wSaveInstance write = iota
	wDeleteInstance
	wSaveMigration
	wFrame
	wFrames
	wLogLine
	wLogLines
	wLogCount
	wRegisterLogs
	wCountLogStates
	wOldestLogStates
	wForgetLogs
	wForgetLogState
	wSavepoint
	wRelease
	wRollbackTo
	numWrites
)

var writeSQL = [numWrites]string{
	wSaveInstance: `INSERT INTO instances
		(id, job_id, role, node, template, runtime, state, error, params, token, migration_id, ports, connected, created_at, updated_at, env, runtime_ref, healthy, adjustments)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET job_id=excluded.job_id, role=excluded.role, node=excluded.node,
		template=excluded.template, runtime=excluded.runtime, state=excluded.state, error=excluded.error,
		params=excluded.params, token=excluded.token, migration_id=excluded.migration_id, ports=excluded.ports,
		connected=excluded.connected, updated_at=excluded.updated_at, env=excluded.env,
		runtime_ref=excluded.runtime_ref, healthy=excluded.healthy, adjustments=excluded.adjustments`,
	wDeleteInstance: `DELETE FROM instances WHERE id = ?`,
	wSaveMigration: `INSERT INTO migrations (id, job_id, state, started_at, doc) VALUES (?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET job_id=excluded.job_id, state=excluded.state, doc=excluded.doc`,
	wFrame:   `INSERT INTO frames (at, node, job_id, role, direction, type, size, data) VALUES (?,?,?,?,?,?,?,?)`,
	wFrames:  `INSERT INTO frames (at, node, job_id, role, direction, type, size, data) VALUES (?,?,?,?,?,?,?,?)` + strings.Repeat(`,(?,?,?,?,?,?,?,?)`, frameRows-1),
	wLogLine: `INSERT INTO logs (instance, service, stream, at, text) VALUES (?,?,?,?,?)`,
	// logRows lines at once: one statement's overhead is most of a line's.
	wLogLines: `INSERT INTO logs (instance, service, stream, at, text) VALUES (?,?,?,?,?)` + strings.Repeat(`,(?,?,?,?,?)`, logRows-1),
	wLogCount: `INSERT INTO log_state (instance, lines, bytes, updated_at) VALUES (?,?,?,?)
		ON CONFLICT(instance) DO UPDATE SET lines = lines + excluded.lines, bytes = bytes + excluded.bytes, updated_at = excluded.updated_at
		RETURNING lines, bytes`,
	// An instance's registration: one per launch, so prepared too.
	wRegisterLogs:    `INSERT INTO log_state (instance, updated_at) VALUES (?,?) ON CONFLICT(instance) DO NOTHING`,
	wCountLogStates:  `SELECT count(*) FROM log_state`,
	wOldestLogStates: `SELECT instance FROM log_state ORDER BY updated_at LIMIT ?`,
	wForgetLogs:      `DELETE FROM logs WHERE instance = ?`,
	wForgetLogState:  `DELETE FROM log_state WHERE instance = ?`,
	// A write of several statements inside the journal's batch is one
	// savepoint: prepared, as it runs for most timeline appends.
	wSavepoint:  `SAVEPOINT writes`,
	wRelease:    `RELEASE writes`,
	wRollbackTo: `ROLLBACK TO writes`,
}

// prepareWrites prepares the writes on first use. It must run before a
// transaction is begun: preparing needs the store's one connection, which
// a transaction holds.
func (s *Store) prepareWrites() error {
	s.prepOnce.Do(func() {
		for w, q := range writeSQL {
			st, err := s.pool().PrepareContext(context.Background(), q)
			if err != nil {
				s.prepErr = fmt.Errorf("prepare store writes: %w", err)
				return
			}
			s.writes[w] = st
		}
		var err error
		if s.timelineInserts, err = prepareRowInserts(s.pool(), `INSERT OR REPLACE INTO migration_events (migration_id, seq, at, phase, side, detail, frame, kind) VALUES `, 8); err != nil {
			s.prepErr = fmt.Errorf("prepare store writes: %w", err)
			return
		}
		if s.eventInserts, err = prepareRowInserts(s.pool(), `INSERT INTO events (at, kind, instance, migration, data) VALUES `, 5); err != nil {
			s.prepErr = fmt.Errorf("prepare store writes: %w", err)
		}
	})
	return s.prepErr
}

// insertRows is the most rows one of a rowInserts' statements inserts.
const insertRows = 16

// rowInserts are one INSERT's statements for 1 to insertRows rows,
// prepared once. Many rows in one statement cost about half what one
// statement per row does (BenchmarkAppendEvents), and a write of up to
// insertRows rows is one statement: atomic by itself, with no savepoint in
// the journal's batch.
type rowInserts struct {
	stmts []*sql.Stmt // stmts[n-1] inserts n rows
	cols  int
}

func prepareRowInserts(db *sql.DB, head string, cols int) (rowInserts, error) {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	ri := rowInserts{stmts: make([]*sql.Stmt, insertRows), cols: cols}
	for n := range ri.stmts {
		st, err := db.PrepareContext(context.Background(), head+strings.TrimSuffix(strings.Repeat(row+",", n+1), ","))
		if err != nil {
			ri.close()
			return rowInserts{}, err
		}
		ri.stmts[n] = st
	}
	return ri, nil
}

func (ri rowInserts) close() {
	for _, st := range ri.stmts {
		if st != nil {
			st.Close()
		}
	}
}

// insert writes n rows, row(args, i) appending row i's values to args: in
// one statement for up to insertRows rows, else in several, atomically.
func (s *Store) insert(ctx context.Context, ri rowInserts, n int, row func(args []any, i int) []any) error {
	run := func(ctx context.Context, tx *sql.Tx, from, to int) error {
		st := ri.stmts[to-from-1]
		if tx != nil {
			st = tx.StmtContext(ctx, st) // reuses the statement prepared on the connection
		}
		args := make([]any, 0, (to-from)*ri.cols)
		for i := from; i < to; i++ {
			args = row(args, i)
		}
		_, err := st.ExecContext(ctx, args...)
		return err
	}
	if n <= insertRows {
		return run(ctx, batchTx(ctx), 0, n)
	}
	return s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for from := 0; from < n; from += insertRows {
			if err := run(ctx, tx, from, min(n, from+insertRows)); err != nil {
				return err
			}
		}
		return nil
	})
}

// exec runs a prepared write in tx, or as its own transaction when tx is
// nil. Callers holding a transaction have called prepareWrites before it.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, w write, args ...any) error {
	st, err := s.stmt(ctx, tx, w)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}

// stmt is a prepared statement, in tx when tx is not nil (see exec).
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, w write) (*sql.Stmt, error) {
	if err := s.prepareWrites(); err != nil {
		return nil, err
	}
	st := s.writes[w]
	if tx != nil {
		st = tx.StmtContext(ctx, st) // reuses the statement prepared on the connection
	}
	return st, nil
}

var _ sim.Store = (*Store)(nil)

// Open opens (creating if needed) the store at path, or an in-memory one for
// Memory, and brings its schema up to date.
//
// An in-memory store is new and empty, so there is nothing to check: its
// schema is built in the background, and every query waits for it (see
// pool). Building it is most of what opening costs (about 2 ms), and
// `normsim up --db :memory:` need not wait for it to be ready.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// Options say how OpenWith opens a store.
type Options struct {
	// Background runs an in-memory store's schema build, work that nothing
	// waits for until the first query; nil runs it on a goroutine of its
	// own. normsim up queues it with its other start-up work, so that it
	// does not take a second core from the first requests.
	Background func(work func())
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	if path == Memory {
		return openDB(ctx, path, o.Background)
	}
	if err := checkStoreFile(path); err != nil {
		return nil, err
	}
	if err := checkBeside(path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	lock, err := acquireLock(path)
	if err != nil {
		return nil, err
	}
	s, err := openDB(ctx, path, nil)
	if err != nil {
		lock.release()
		return nil, err
	}
	s.lock = lock
	s.noReturn = newMarks(path)
	s.startCheck()
	return s, nil
}

// startCheck begins the check of the store file in the background, on a
// read-only connection of its own: it reads the whole file (about half a
// second for 270 MiB), which start-up and the store's one writing
// connection need not wait for.
func (s *Store) startCheck() {
	ctx, stop := context.WithCancel(context.Background())
	s.check.done, s.check.stop, s.check.started = make(chan struct{}), stop, true
	go func() {
		defer close(s.check.done)
		err := quickCheck(ctx, s.path)
		if ctx.Err() != nil {
			return // the store closed first: nothing was judged
		}
		s.check.mu.Lock()
		s.check.damage = err
		s.check.mu.Unlock()
	}()
}

// Checked is closed once the check of the store file begun at open is
// over (at once for a store that has none, as an in-memory one).
func (s *Store) Checked() <-chan struct{} {
	if !s.check.started {
		done := make(chan struct{})
		close(done)
		return done
	}
	return s.check.done
}

// quickCheck runs SQLite's PRAGMA quick_check on a store file: a file
// damaged on disk opens, and then loses what is written to its broken
// pages. The first problems it names are the error; nil when it is sound.
func quickCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", fileURI(path)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("the store file %s could not be checked: %w", path, err)
	}
	defer db.Close()
	var problems []string
	if cut := cutShort(ctx, db, path); cut != "" {
		// quick_check reads a short last page as if zeros followed, and
		// may find nothing wrong (attack round 16, B-F1).
		problems = append(problems, cut)
	}
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(5)`)
	if err == nil {
		for rows.Next() {
			var line string
			if err = rows.Scan(&line); err != nil {
				break
			}
			if line != "ok" {
				problems = append(problems, strings.TrimSpace(line))
			}
		}
		err = errors.Join(err, rows.Err(), rows.Close())
	}
	if err != nil {
		// The check cannot read the file through: SQLite says how.
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the store file %s is damaged (PRAGMA quick_check: %s); start normsim with another --db (the damaged file is left for you to inspect)", path, strings.Join(problems, "; "))
}

// cutShort says how a store file is not a whole number of its pages
// (SQLite writes whole pages only, so the file was cut short or grown by
// something else), or "" when it is, or when SQLite cannot say its page
// size (the check after says why).
func cutShort(ctx context.Context, db *sql.DB, path string) string {
	var page int64
	info, err := os.Stat(path)
	if err != nil || db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page) != nil || page <= 0 || info.Size()%page == 0 {
		return ""
	}
	return fmt.Sprintf("the file is %d bytes, not a whole number of its %d-byte pages: it was cut short", info.Size(), page)
}

// Damaged is what the check begun at open found wrong with the store
// file: nil while it runs, when the file is sound, and for an in-memory
// store.
func (s *Store) Damaged() error {
	s.check.mu.Lock()
	defer s.check.mu.Unlock()
	return s.check.damage
}

// OpenToRead opens a store file without taking its lock, to read what it
// holds while a normsim may be running on it (its writes go on; WAL lets
// readers in). Nothing must be written through it.
func OpenToRead(ctx context.Context, path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := checkStoreFile(path); err != nil {
		return nil, err
	}
	return openDB(ctx, path, nil)
}

// refusedFile is a --db that is no store this normsim can open: it says
// why and what to do instead, whole, so nothing wraps it.
type refusedFile struct{ path, why string }

func (e *refusedFile) Error() string { return "--db " + e.path + ": " + e.why }

// notAStore is what to do with a --db that holds something else.
const notAStore = "give a new file or a normsim store"

// sqliteHeader begins every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// checkStoreFile refuses a --db that cannot be a store before anything
// opens it: what is not a regular file (a FIFO blocked or failed with
// "disk I/O error (10)", and a device would be written to), and a file
// that is not a SQLite database (SQLite said only "file is not a database
// (26)"). A missing or empty file becomes a new store.
func checkStoreFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		// Missing is fine; what else Stat meets, creating or locking the
		// file meets too, and says.
		return nil
	}
	if !info.Mode().IsRegular() {
		return &refusedFile{path, "is " + sim.FileKind(info.Mode()) + ", not a file; " + notAStore}
	}
	if info.Size() == 0 {
		return nil
	}
	is, err := isSQLite(path)
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if !is {
		return &refusedFile{path, "is not a SQLite database; " + notAStore}
	}
	return nil
}

// isSQLite says whether the file at path begins as a SQLite database.
func isSQLite(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	n, _ := io.ReadFull(f, head)
	return string(head[:n]) == sqliteHeader, nil
}

// checkBeside keeps stores from sharing files: normsim keeps a lock file
// and a marks file beside each store (<store>.lock, <store>.noreturn), so
// a store named as one of them, or one where either path holds something
// else, would be written over by the other (attack round 11, B1: the
// marks cut another normsim's store down to a line).
func checkBeside(path string) error {
	for _, suffix := range []string{".lock", ".noreturn"} {
		if strings.HasSuffix(path, suffix) {
			return &refusedFile{path, "normsim keeps <store>" + suffix + " beside each store, so another store's could be written over this one; name the store otherwise"}
		}
	}
	if err := checkOwnFile(holderPath(path), "lock file"); err != nil {
		return &refusedFile{path, err.Error()}
	}
	if err := checkOwnFile(marksPath(path), marksWhat); err != nil {
		return &refusedFile{path, err.Error()}
	}
	return nil
}

// fileURI is the SQLite URI of the file named path, as the file system
// names it: SQLite decodes %XX in a URI's path and ends it at "?" or "#",
// so --db '%73.db' opened s.db, and 's.db?x=1' opened s.db too, beside
// the normsim that held it, whose lock is on the file as named (issue 34,
// third attack, 2). The path is made absolute so that one starting with
// "//" is not read as a host.
func fileURI(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return "file://" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// openDB opens the database at path; an in-memory one's schema is built by
// background, or on a goroutine of its own when that is nil.
func openDB(ctx context.Context, path string, background func(func())) (*Store, error) {
	var dsn string
	if path == Memory {
		dsn = "file::memory:?_pragma=foreign_keys(1)&_pragma=page_size(" + strconv.Itoa(memoryPageSize) + ")"
	} else {
		// No journal_mode(WAL) here: it is written into the file, and migrate
		// sets it once it knows the file is a store (or empty).
		dsn = fileURI(path) + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// One writer at a time is SQLite's model anyway; one connection also keeps
	// an in-memory database a single database.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path, schemaDone: make(chan struct{}), logLimits: DefaultLogLimits, frameLimits: DefaultFrameLimits,
		eventLimits: sim.DefaultEventLimits, eventCounts: map[string]int64{}}
	if path == Memory {
		s.owner = newOwner()
		if background == nil {
			background = func(work func()) { go work() }
		}
		background(func() {
			defer close(s.schemaDone)
			ctx := context.Background()
			err := s.migrate(ctx)
			if err == nil {
				_, err = db.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'owner'`, s.owner)
			}
			if err != nil {
				// Only a broken build can get here (the tests open memory
				// stores by the hundred): every query fails from now on,
				// and Close says why.
				s.schemaErr = fmt.Errorf("open store %s: %w", path, err)
				db.Close()
			}
		})
		return s, nil
	}
	defer close(s.schemaDone)
	if err = s.migrate(ctx); err == nil {
		err = checkSchema(ctx, db, path)
	}
	if err == nil {
		err = db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'owner'`).Scan(&s.owner)
		if errors.Is(err, sql.ErrNoRows) {
			err = &refusedFile{path, "its owner row (table meta) is gone: the file was edited or damaged; " + editedFix}
		}
	}
	if err != nil {
		db.Close()
		var refused *refusedFile
		if errors.As(err, &refused) {
			return nil, err
		}
		if damaged(err) {
			return nil, fmt.Errorf("open store %s: %w: the file is damaged (cut short, or overwritten); move it aside and start on a new --db, or restore a copy of it", path, err)
		}
		if noRoom(err) {
			return nil, fmt.Errorf("open store %s: %w: SQLite could not make room for the store in %s (the disk is full, or its file system will not grow the file and the -wal and -shm files beside it); free space there, or give --db another path, or :memory:", path, err, filepath.Dir(path))
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// noRoom says whether err is SQLite failing to grow a file: SQLITE_FULL,
// or the I/O errors a full disk gives when the shared-memory file or a
// write cannot be extended (SQLITE_IOERR_SHMSIZE reads only "disk I/O
// error").
func noRoom(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() {
	case sqlite3.SQLITE_IOERR_SHMSIZE, sqlite3.SQLITE_IOERR_WRITE, sqlite3.SQLITE_IOERR_TRUNCATE:
		return true
	}
	return se.Code()&0xff == sqlite3.SQLITE_FULL // whatever its extended code
}

// damaged says whether err is SQLite's word for a damaged file:
// SQLITE_CORRUPT or SQLITE_NOTADB, whatever its extended code.
func damaged(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB
}

// memoryPageSize is an in-memory store's page size. Its pages live in
// SQLite's page cache, which modernc's allocator serves in power-of-two
// slots: a 4 KiB page and its header took an 8 KiB slot, so a store of
// 70 MiB held 160 MiB. A 32 KiB page takes a region of its own, resident
// only as far as it is used: the same store holds about 96 MiB
// (docs/benchmarks.md, section 7). Larger pages cost a write that touches
// many of them (an index's, at random) more: the events table's inserts
// run at about 0.6x, the timeline's and the frames' as fast. A file
// store's pages live in the system's cache and keep SQLite's default.
const memoryPageSize = 32 << 10

// pool is the database once its schema is built.
func (s *Store) pool() *sql.DB {
	<-s.schemaDone
	return s.db
}

// newOwner is a fresh owner label: 16 hex digits, as the meta migration
// draws for a store file.
func newOwner() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type batchKey struct{}

// Batch runs fn with a context under which every write to this store shares
// one transaction, committed when fn returns. A write that fails is its
// caller's error and is undone alone; the others are committed. One commit
// for a burst of small writes is most of what a write costs, and the
// store's single connection is held for the batch, so keep fn to writes.
func (s *Store) Batch(ctx context.Context, fn func(ctx context.Context)) error {
	if err := s.prepareWrites(); err != nil {
		return err
	}
	tx, err := s.pool().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin batch: %w", err)
	}
	defer tx.Rollback()
	// ctx bounds the transaction (database/sql rolls it back when ctx
	// ends); its statements run without a deadline of their own. With one,
	// modernc's driver starts a goroutine and sets a progress handler for
	// every statement to interrupt it: at 10,000 handovers about 1,400 of
	// those goroutines waited for a core at once (docs/benchmarks.md,
	// section 7).
	fn(context.WithValue(context.WithoutCancel(ctx), batchKey{}, tx))
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit batch: %w", err)
	}
	return nil
}

// batchTx is the transaction of the batch ctx runs in, or nil. A single
// statement that fails in it is undone alone by SQLite.
func batchTx(ctx context.Context) *sql.Tx {
	tx, _ := ctx.Value(batchKey{}).(*sql.Tx)
	return tx
}

// atomically runs several writes as one: inside a batch in a savepoint of
// its transaction, otherwise in a transaction of their own. fn's ctx is
// for its statements: as in a batch, ctx bounds the transaction (database/sql
// rolls it back when ctx ends) and the statements run without a deadline of
// their own, which would cost each a goroutine of modernc's (see Batch).
func (s *Store) atomically(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if tx := batchTx(ctx); tx != nil {
		if err := s.exec(ctx, tx, wSavepoint); err != nil {
			return err
		}
		if err := fn(ctx, tx); err != nil {
			s.exec(ctx, tx, wRollbackTo)
			s.exec(ctx, tx, wRelease)
			return err
		}
		return s.exec(ctx, tx, wRelease)
	}
	if err := s.prepareWrites(); err != nil {
		return err
	}
	tx, err := s.pool().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(context.WithoutCancel(ctx), tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Path is where the store lives (Memory for an in-memory one).
func (s *Store) Path() string { return s.path }

// Size is the database's size in bytes (the pages it uses, an in-memory
// one's too) and how many migrations it holds.
func (s *Store) Size(ctx context.Context) (bytes int64, migrations int, err error) {
	db := s.pool()
	var pages, pageSize, free int64
	if err := db.QueryRowContext(ctx, `SELECT page_count, page_size, freelist_count FROM pragma_page_count(), pragma_page_size(), pragma_freelist_count()`).Scan(&pages, &pageSize, &free); err != nil {
		return 0, 0, fmt.Errorf("read the store's size: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM migrations`).Scan(&migrations); err != nil {
		return 0, 0, fmt.Errorf("count migrations: %w", err)
	}
	return (pages - free) * pageSize, migrations, nil
}

// Close closes the database.
func (s *Store) Close() error {
	if s.check.started {
		s.check.stop()
		<-s.check.done
	}
	<-s.schemaDone
	for _, st := range s.writes {
		if st != nil {
			st.Close()
		}
	}
	s.timelineInserts.close()
	s.eventInserts.close()
	err := errors.Join(s.schemaErr, s.db.Close(), s.noReturn.close())
	s.lock.release()
	return err
}

// migrate applies the embedded migrations not yet applied, in name order,
// in one transaction: a store is either on the new schema or untouched. A
// file it refuses (see appliedMigrations) is only read.
func (s *Store) migrate(ctx context.Context) error {
	db := s.db // not pool: migrate is what pool waits for
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	applied, err := s.appliedMigrations(ctx, names)
	if err != nil {
		return err
	}
	if s.path != Memory {
		// Only now: a refused file is left in its own journal mode.
		if _, err := db.ExecContext(ctx, `PRAGMA journal_mode=WAL`); err != nil {
			return fmt.Errorf("set journal_mode WAL: %w", err)
		}
	}
	var tx *sql.Tx
	for _, name := range names {
		if applied[name] {
			continue
		}
		body, err := migrationFiles.ReadFile(name)
		if err != nil {
			return err
		}
		if tx == nil {
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				return err
			}
			defer tx.Rollback()
			// In the transaction: a store whose migrations fail is left
			// without it, as it was.
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("apply %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)`, name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("apply %s: %w", name, err)
		}
	}
	if tx == nil {
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// appliedMigrations is the set of migrations (of known, this normsim's, in
// name order) the database has applied. It refuses a database that is not
// a normsim store of this version: another program's, whose tables
// normsim's would be added to (or clash with: an "instances" of its own),
// and a newer normsim's, whose schema this one would read and write as if
// it were its own. A normsim store is one whose schema_migrations records
// the first migration: every store has applied it, in the transaction that
// made its tables.
func (s *Store) appliedMigrations(ctx context.Context, known []string) (map[string]bool, error) {
	db := s.db
	// SQLite's own tables (sqlite_sequence, sqlite_stat1, ...) are made by
	// SQLite for anyone's, normsim's too: they say nothing of whose.
	tables, err := queryNames(ctx, db, `SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	applied := map[string]bool{}
	// Other programs keep a schema_migrations too, of other columns.
	ours := false
	if slices.Contains(tables, "schema_migrations") {
		columns, err := queryNames(ctx, db, `SELECT name FROM pragma_table_info('schema_migrations')`)
		if err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		if ours = slices.Contains(columns, "name") && slices.Contains(columns, "applied_at"); ours {
			names, err := queryNames(ctx, db, `SELECT name FROM schema_migrations ORDER BY name`)
			if err != nil {
				return nil, fmt.Errorf("read schema_migrations: %w", err)
			}
			for _, name := range names {
				applied[name] = true
			}
		}
	}
	if !applied[known[0]] {
		// Not a normsim store: a new one if it holds nothing, but an
		// empty schema_migrations, which older normsims made before their
		// first migration and left when it failed.
		foreign := slices.DeleteFunc(tables, func(t string) bool { return t == "schema_migrations" && ours && len(applied) == 0 })
		if len(foreign) > 0 {
			return nil, &refusedFile{s.path, "holds tables normsim did not make (" + someNames(foreign) + "); " + notAStore}
		}
		return applied, nil
	}
	var unknown []string
	for name := range applied {
		if _, found := slices.BinarySearch(known, name); !found {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, &refusedFile{s.path, fmt.Sprintf("was written by a newer normsim (schema %s, this one knows up to %s); use that normsim or a new file",
			migrationName(unknown[len(unknown)-1]), migrationName(known[len(known)-1]))}
	}
	return applied, nil
}

// queryNames runs a query of one text column.
func queryNames(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// someNames lists names for a message: the first few, and how many more.
func someNames(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// migrationName is a migration as people name it: 0011_seam_capture_rtp
// for migrations/0011_seam_capture_rtp.sql.
func migrationName(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// SaveInstance inserts or replaces an instance.
func (s *Store) SaveInstance(ctx context.Context, in *sim.Instance) error {
	err := s.exec(ctx, batchTx(ctx), wSaveInstance,
		in.ID, in.JobID, in.Role, in.Node, in.Template, in.Runtime, string(in.State), in.Error,
		jsonText(in.Params), in.Token, in.MigrationID, jsonText(in.Ports), in.Connected,
		nanos(in.CreatedAt), nanos(in.UpdatedAt), jsonText(in.Env), jsonText(in.RuntimeRef), in.Healthy, jsonText(in.Adjustments))
	if err != nil {
		return fmt.Errorf("save instance %s: %w", in.ID, err)
	}
	return nil
}

const instanceColumns = `id, job_id, role, node, template, runtime, state, error, params, token, migration_id, ports, connected, created_at, updated_at, env, runtime_ref, healthy, adjustments`

func scanInstance(row interface{ Scan(...any) error }) (*sim.Instance, error) {
	var in sim.Instance
	var state, params, ports, env, ref, adjustments string
	var created, updated int64
	if err := row.Scan(&in.ID, &in.JobID, &in.Role, &in.Node, &in.Template, &in.Runtime, &state, &in.Error,
		&params, &in.Token, &in.MigrationID, &ports, &in.Connected, &created, &updated, &env, &ref, &in.Healthy, &adjustments); err != nil {
		return nil, err
	}
	in.State = sim.InstanceState(state)
	in.CreatedAt, in.UpdatedAt = fromNanos(created), fromNanos(updated)
	// A column that does not decode is a damaged record, not an empty
	// value: read as none, params fell back to the template's defaults.
	for _, c := range []struct {
		name, text string
		into       any
	}{{"env", env, &in.Env}, {"runtime_ref", ref, &in.RuntimeRef}, {"adjustments", adjustments, &in.Adjustments},
		{"params", params, &in.Params}, {"ports", ports, &in.Ports}} {
		if c.text == "" {
			continue
		}
		if err := json.Unmarshal([]byte(c.text), c.into); err != nil {
			return &in, fmt.Errorf("its %s column does not decode: %w", c.name, err)
		}
	}
	return &in, nil
}

// GetInstance returns one instance or an ENotFound error.
func (s *Store) GetInstance(ctx context.Context, id string) (*sim.Instance, error) {
	rows, err := s.pool().QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("get instance %s: %w", id, err)
		}
		return nil, sim.Errorf(sim.ENotFound, "instance %q not found", id)
	}
	// The query ran: what Scan refuses is the record's values.
	in, err := scanInstance(rows)
	if err != nil {
		return nil, damagedRecord(s.path, "instance "+id, err, "DELETE FROM instances WHERE id = '"+id+"'")
	}
	return in, nil
}

// ListInstances returns every instance, oldest first.
func (s *Store) ListInstances(ctx context.Context) ([]*sim.Instance, error) {
	rows, err := s.pool().QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	defer rows.Close()
	var out []*sim.Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			if in != nil {
				return nil, damagedRecord(s.path, "instance "+in.ID, err, "DELETE FROM instances WHERE id = '"+in.ID+"'")
			}
			return nil, damagedRecord(s.path, "one of its instances", err, "")
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// DeleteInstance removes an instance's row.
func (s *Store) DeleteInstance(ctx context.Context, id string) error {
	if err := s.exec(ctx, batchTx(ctx), wDeleteInstance, id); err != nil {
		return fmt.Errorf("delete instance %s: %w", id, err)
	}
	s.eventMu.Lock()
	delete(s.eventCounts, id) // only says when to count its events again
	s.eventMu.Unlock()
	return nil
}

// SaveMigration inserts or replaces a migration's document (not its events).
func (s *Store) SaveMigration(ctx context.Context, m *sim.Migration) error {
	if s.prunedIDs.Drops(m.ID, 1) {
		return nil
	}
	doc := *m
	doc.Events = nil
	args := []any{m.ID, m.JobID, string(m.State), nanos(m.StartedAt), jsonText(doc)}
	if !m.State.Ended() || s.MigrationCap() == 0 {
		if err := s.exec(ctx, batchTx(ctx), wSaveMigration, args...); err != nil {
			return fmt.Errorf("save migration %s: %w", m.ID, err)
		}
		return nil
	}
	// A migration that finished may push the oldest past the cap: saving
	// it and dropping them are one write, undone together.
	var pruned []sim.PrunedMigration
	err := s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.exec(ctx, tx, wSaveMigration, args...); err != nil {
			return err
		}
		var err error
		pruned, err = s.pruneMigrations(ctx, tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("save migration %s: %w", m.ID, err)
	}
	s.prunedIDs.Add(pruned...)
	s.migCap.pruned.Add(int64(len(pruned)))
	return nil
}

// GetMigration returns a migration with its events.
func (s *Store) GetMigration(ctx context.Context, id string) (*sim.Migration, error) {
	m, err := s.GetMigrationSummary(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.Events, err = s.migrationEvents(ctx, id); err != nil {
		return nil, err
	}
	return m, nil
}

// GetMigrationSummary returns a migration without its timeline (Events
// nil), or an ENotFound error.
func (s *Store) GetMigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	var state, doc string
	err := s.pool().QueryRowContext(ctx, `SELECT state, doc FROM migrations WHERE id = ?`, id).Scan(&state, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.prunedIDs.NotFound(id, s.MigrationCap())
	}
	if err != nil {
		return nil, fmt.Errorf("get migration %s: %w", id, err)
	}
	m, err := s.decodeMigration(id, state, doc)
	if err != nil {
		return nil, err
	}
	m.Events = nil
	return m, nil
}

// damagedRecord is the error of a record the store holds but cannot
// read: the file was edited or damaged (SQLite's own check passes a value
// of the wrong type, or a document that does not decode). It names the
// file, the record and what to do, for the API's answer, the log and a
// start that stops on it alike; remove, when known, is the SQL that
// deletes the record.
func damagedRecord(path, record string, err error, remove string) error {
	if remove != "" {
		remove = ", or delete the record (" + remove + ") while no normsim runs on it"
	}
	return sim.Errorf(sim.EInternal, "store %s is damaged or was edited: its record of %s cannot be read (%v); move it aside and start on a new --db, or restore a copy of it%s", path, record, err, remove)
}

// decodeMigration reads the stored document of migration id, whose row
// says it is in state. The row's state is what lists and recovery select
// by, the document's what is served: one edited without the other would
// have recovery end a migration the record calls over, or a list by state
// serve another, so a record whose two disagree is damaged.
func (s *Store) decodeMigration(id, state, doc string) (*sim.Migration, error) {
	var m sim.Migration
	err := json.Unmarshal([]byte(doc), &m)
	switch {
	case err != nil:
	case m.ID != id:
		err = fmt.Errorf("its document names migration %q", m.ID)
	case !slices.Contains(sim.MigrationStates, m.State):
		err = fmt.Errorf("its document's state %q is none of %v", m.State, sim.MigrationStates)
	case string(m.State) != state:
		err = fmt.Errorf("its row says state %q and its document %q", state, m.State)
	}
	if err != nil {
		return nil, damagedRecord(s.path, "migration "+id, err, "DELETE FROM migrations WHERE id = '"+id+"'")
	}
	return &m, nil
}

func (s *Store) migrationEvents(ctx context.Context, id string) ([]sim.MigrationEvent, error) {
	rows, err := s.pool().QueryContext(ctx, `SELECT seq, at, phase, side, detail, frame, kind FROM migration_events WHERE migration_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("list migration events %s: %w", id, err)
	}
	defer rows.Close()
	out := []sim.MigrationEvent{}
	for rows.Next() {
		var ev sim.MigrationEvent
		var at int64
		var frame sql.NullString
		if err := rows.Scan(&ev.Seq, &at, &ev.Phase, &ev.Side, &ev.Detail, &frame, &ev.Kind); err != nil {
			return nil, damagedRecord(s.path, "one of migration "+id+"'s timeline events", err,
				"DELETE FROM migration_events WHERE migration_id = '"+id+"'")
		}
		ev.At = fromNanos(at)
		if frame.Valid && frame.String != "" {
			ev.Frame = new(sim.FrameInfo)
			if err := json.Unmarshal([]byte(frame.String), ev.Frame); err != nil {
				// The event costs only its frame: the timeline reads on.
				ev.Frame = &sim.FrameInfo{PayloadNote: fmt.Sprintf("the stored record of this frame could not be read (%v): the store %s is damaged or was edited", err, s.path)}
			}
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// ListMigrations returns migrations newest first, without their events.
// Records it cannot read are left out and counted in its error, a
// *sim.UnreadableRecords, returned with the rest.
func (s *Store) ListMigrations(ctx context.Context, f sim.MigrationFilter) ([]*sim.Migration, error) {
	where, args := migrationWhere(f)
	q := `SELECT id, state, doc FROM migrations` + where + ` ORDER BY started_at DESC, id`
	switch {
	case f.Limit > 0:
		q += fmt.Sprintf(" LIMIT %d OFFSET %d", f.Limit, max(f.Offset, 0))
	case f.Offset > 0:
		q += fmt.Sprintf(" LIMIT -1 OFFSET %d", f.Offset)
	}
	rows, err := s.pool().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	defer rows.Close()
	out := []*sim.Migration{}
	var unreadable *sim.UnreadableRecords
	for rows.Next() {
		var id, state, doc string
		if err := rows.Scan(&id, &state, &doc); err != nil {
			unreadable = unreadable.Add(damagedRecord(s.path, "one of its migrations", err, ""))
			continue
		}
		m, err := s.decodeMigration(id, state, doc)
		if err != nil {
			// One damaged record costs the list that record, not the
			// list: the rest are served, and the count says what is not.
			unreadable = unreadable.Add(err)
			continue
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	return out, unreadable.Err()
}

// CountMigrations counts the migrations ListMigrations lists for f, its
// Limit and Offset aside.
func (s *Store) CountMigrations(ctx context.Context, f sim.MigrationFilter) (int, error) {
	where, args := migrationWhere(f)
	var n int
	if err := s.pool().QueryRowContext(ctx, `SELECT COUNT(*) FROM migrations`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count migrations: %w", err)
	}
	return n, nil
}

// migrationWhere is f's WHERE clause (empty for none) and its arguments.
func migrationWhere(f sim.MigrationFilter) (string, []any) {
	var where []string
	var args []any
	if f.JobID != "" {
		where = append(where, "job_id = ?")
		args = append(args, f.JobID)
	}
	if f.State != "" {
		where = append(where, "state = ?")
		args = append(args, string(f.State))
	}
	if len(f.Except) > 0 {
		// One JSON array, however many: a manager excepts every migration
		// it runs, thousands under load.
		where = append(where, "id NOT IN (SELECT value FROM json_each(?))")
		args = append(args, jsonText(f.Except))
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// AppendMigrationEvents adds events to a migration's timeline, all or
// none.
func (s *Store) AppendMigrationEvents(ctx context.Context, migrationID string, evs []sim.MigrationEvent) error {
	if len(evs) == 0 || s.prunedIDs.Drops(migrationID, len(evs)) {
		return nil
	}
	if err := s.prepareWrites(); err != nil {
		return err
	}
	err := s.insert(ctx, s.timelineInserts, len(evs), func(args []any, i int) []any {
		ev := evs[i]
		var frame any
		if ev.Frame != nil {
			frame = jsonText(ev.Frame)
		}
		return append(args, migrationID, ev.Seq, nanos(ev.At), string(ev.Phase), ev.Side, ev.Detail, frame, string(ev.Kind))
	})
	if err != nil {
		return fmt.Errorf("append migration events %s/%d-%d: %w", migrationID, evs[0].Seq, evs[len(evs)-1].Seq, err)
	}
	return nil
}

// AppendEvents records changes, in order, all or none.
func (s *Store) AppendEvents(ctx context.Context, evs []sim.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := s.prepareWrites(); err != nil {
		return err
	}
	err := s.insert(ctx, s.eventInserts, len(evs), func(args []any, i int) []any {
		ev := evs[i]
		var data any
		if len(ev.Data) > 0 {
			data = string(ev.Data)
		}
		return append(args, nanos(ev.At), string(ev.Kind), ev.Instance, ev.Migration, data)
	})
	if err != nil {
		return fmt.Errorf("append %d events from %s: %w", len(evs), evs[0].Kind, err)
	}
	s.boundEvents(ctx, evs)
	return nil
}

// SetEventLimits changes the bound (before the store is used).
func (s *Store) SetEventLimits(l sim.EventLimits) {
	if l.PerInstance <= 0 || l.Total < 0 {
		panic(fmt.Sprintf("sqlite: event limits must be positive: %+v", l))
	}
	s.eventLimits = l
}

// EventsTrimmed is how many events the bound let go of.
func (s *Store) EventsTrimmed() int64 { return s.eventsTrimmed.Load() }

// boundEvents lets go of the oldest events of each instance of evs past
// the bound. The counts kept in memory only say when to count: a store
// file opened again starts them at 0, an undone batch leaves them high,
// and the count in the table settles both. A trim that fails is tried
// again at the next event; the events stay written.
func (s *Store) boundEvents(ctx context.Context, evs []sim.Event) {
	s.eventMu.Lock()
	over := s.eventLimits.CountEvents(s.eventCounts, evs)
	s.eventMu.Unlock()
	for _, inst := range over {
		var n, dropped int64
		err := s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
			dropped = 0
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE instance = ?`, inst).Scan(&n); err != nil {
				return err
			}
			keep, ok := s.eventLimits.EventsKept(n)
			if !ok {
				return nil
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE instance = ? ORDER BY seq LIMIT ?)`, inst, n-keep)
			dropped, n = n-keep, keep
			return err
		})
		if err != nil {
			continue
		}
		s.eventsTrimmed.Add(dropped)
		s.eventMu.Lock()
		s.eventCounts[inst] = n
		s.eventTotal -= dropped
		s.eventMu.Unlock()
	}
	s.boundAllEvents(ctx, int64(len(evs)))
}

// boundAllEvents lets go of the oldest events of all past the total
// bound. The count in memory, read from the table at the first append,
// only says when to count again: trims of one instance and undone
// batches leave it high, and the table settles it.
func (s *Store) boundAllEvents(ctx context.Context, added int64) {
	if s.eventLimits.Total <= 0 {
		return
	}
	s.eventMu.Lock()
	s.eventTotal += added
	_, over := s.eventLimits.TotalKept(s.eventTotal)
	first := !s.eventTotalRead
	s.eventMu.Unlock()
	if !over && !first {
		return
	}
	var n, dropped int64
	err := s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		dropped = 0
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM events`).Scan(&n); err != nil {
			return err
		}
		keep, ok := s.eventLimits.TotalKept(n)
		if !ok {
			return nil
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT ?)`, n-keep)
		dropped, n = n-keep, keep
		return err
	})
	if err != nil {
		return // tried again at the next append; the events stay written
	}
	s.eventsTrimmed.Add(dropped)
	s.eventMu.Lock()
	s.eventTotal, s.eventTotalRead = n, true
	s.eventMu.Unlock()
}

// ListEvents returns events oldest first.
func (s *Store) ListEvents(ctx context.Context, f sim.EventFilter) ([]sim.Event, error) {
	q := `SELECT seq, at, kind, instance, migration, data FROM events WHERE seq > ?`
	args := []any{f.AfterSeq}
	if f.Instance != "" {
		q += " AND instance = ?"
		args = append(args, f.Instance)
	}
	if f.Migration != "" {
		q += " AND migration = ?"
		args = append(args, f.Migration)
	}
	switch {
	case f.Tail && f.Limit > 0:
		q = fmt.Sprintf("SELECT * FROM (%s ORDER BY seq DESC LIMIT %d) ORDER BY seq", q, f.Limit)
	case f.Limit > 0:
		q += fmt.Sprintf(" ORDER BY seq LIMIT %d", f.Limit)
	default:
		q += " ORDER BY seq"
	}
	rows, err := s.pool().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []sim.Event
	var unreadable *sim.UnreadableRecords
	for rows.Next() {
		var ev sim.Event
		var at int64
		var data sql.NullString
		err := rows.Scan(&ev.Seq, &at, &ev.Kind, &ev.Instance, &ev.Migration, &data)
		if err == nil && data.Valid && !json.Valid([]byte(data.String)) {
			err = errors.New("its data is not JSON")
		}
		if err != nil {
			// As a migration list: the damaged record is left out and
			// counted, the rest served (seq comes first, so it is read).
			unreadable = unreadable.Add(damagedRecord(s.path, fmt.Sprintf("event %d", ev.Seq), err, fmt.Sprintf("DELETE FROM events WHERE seq = %d", ev.Seq)))
			continue
		}
		ev.At = fromNanos(at)
		if data.Valid {
			ev.Data = json.RawMessage(data.String)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, unreadable.Err()
}

// RecordFrames stores frames in one transaction (the listener batches them
// off the relay path).
func (s *Store) RecordFrames(ctx context.Context, frs []sim.FrameRecord) error {
	if len(frs) == 0 {
		return nil
	}
	if err := s.prepareWrites(); err != nil {
		return err
	}
	return s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// Rows go in frameRows at a time, as log lines do: one statement
		// per row is most of what a batch costs.
		rest := frs
		if len(rest) >= frameRows {
			many := tx.StmtContext(ctx, s.writes[wFrames])
			args := make([]any, 0, 8*frameRows)
			for ; len(rest) >= frameRows; rest = rest[frameRows:] {
				args = args[:0]
				for _, f := range rest[:frameRows] {
					args = append(args, nanos(f.At), f.Node, f.JobID, f.Role, f.Direction, f.Type, f.Size, f.Data)
				}
				if _, err := many.ExecContext(ctx, args...); err != nil {
					return fmt.Errorf("record frames: %w", err)
				}
			}
		}
		if len(rest) > 0 {
			one := tx.StmtContext(ctx, s.writes[wFrame])
			for _, f := range rest {
				if _, err := one.ExecContext(ctx, nanos(f.At), f.Node, f.JobID, f.Role, f.Direction, f.Type, f.Size, f.Data); err != nil {
					return fmt.Errorf("record frame: %w", err)
				}
			}
		}
		return s.boundFrames(ctx, tx, frs)
	})
}

// frameRows is how many frame records one INSERT writes.
const frameRows = 32

// ListFrames returns recorded frames oldest first.
func (s *Store) ListFrames(ctx context.Context, f sim.FrameFilter) ([]sim.FrameRecord, error) {
	const cols = "seq, at, node, job_id, role, direction, type, size, data"
	where := "1=1"
	var args []any
	if f.JobID != "" {
		where += " AND job_id = ?"
		args = append(args, f.JobID)
	}
	if f.Role != "" {
		where += " AND role = ?"
		args = append(args, f.Role)
	}
	q := "SELECT " + cols + " FROM frames WHERE " + where + " ORDER BY seq"
	switch {
	case f.Tail && f.Limit > 0:
		q = fmt.Sprintf("SELECT %s FROM (SELECT %s FROM frames WHERE %s ORDER BY seq DESC LIMIT %d) ORDER BY seq", cols, cols, where, f.Limit)
	case f.Limit > 0:
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.pool().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list frames: %w", err)
	}
	defer rows.Close()
	var out []sim.FrameRecord
	var unreadable *sim.UnreadableRecords
	for rows.Next() {
		var r sim.FrameRecord
		var seq, at int64
		if err := rows.Scan(&seq, &at, &r.Node, &r.JobID, &r.Role, &r.Direction, &r.Type, &r.Size, &r.Data); err != nil {
			unreadable = unreadable.Add(damagedRecord(s.path, fmt.Sprintf("frame %d", seq), err, fmt.Sprintf("DELETE FROM frames WHERE seq = %d", seq)))
			continue
		}
		r.At = fromNanos(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list frames: %w", err)
	}
	return out, unreadable.Err()
}

// JournalMode reports the database's journal mode ("wal" for file stores).
func JournalMode(ctx context.Context, s *Store) (string, error) {
	var mode string
	err := s.pool().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
	return mode, err
}

// Owner is the store's random identity, made when it was created: normsim
// labels what it launches with it, so a restart adopts its own containers
// and never another normsim's.
func (s *Store) Owner() string { return s.owner }

// Setting is what the store keeps under key about the runs that used it
// (e.g. the output sink's port), "" when nothing is kept.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := s.pool().QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, "setting:"+key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// SetSetting keeps value under key for the next run on this store.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	_, err := s.pool().ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, "setting:"+key, value)
	return err
}
