"""A fork while another thread is inside chatfold: the child must not hang.

A lock or a one-time build (the ledger's patterns, the encoder, a
remembered piece's identifiers) held by another thread at the fork would
stay held in the child forever. Each round runs in a fresh process, so that
the first compaction, on a worker thread, builds everything while the main
thread forks; the child then compacts too, and must finish.
"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    import chatfold

    def message(i):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"turn {i}: order ORD-2024-{i:05d} from 10.0.{i % 250}.7 at https://ex.example/t/{i} " * 4
        return {"role": role, "content": text}

    messages = [{"role": "system", "content": "Be terse."}] + [message(i) for i in range(400)]
    hung = 0
    rounds = int(sys.argv[1])
    for r in range(rounds):
        pid = os.fork()
        if pid == 0:
            compactor = chatfold.Compactor(2000, tokenizer="o200k_base")
            worker = threading.Thread(target=lambda: compactor.compact(messages, "extractive"))
            worker.start()
            time.sleep(0.002 * r)
            child = os.fork()
            if child == 0:
                compactor.compact(messages[:200], "extractive")
                os._exit(0)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                done, status = os.waitpid(child, os.WNOHANG)
                if done:
                    worker.join()
                    os._exit(os.waitstatus_to_exitcode(status))
                time.sleep(0.02)
            os.kill(child, 9)
            os.waitpid(child, 0)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code == 3:
            hung += 1
        elif code != 0:
            print(f"round {r}: exit {code}")
            sys.exit(1)
    print(f"hung {hung} of {rounds}")
    """
)


def test_a_fork_during_a_first_compaction_on_another_thread_leaves_a_working_child():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "20"], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "hung 0 of 20", done.stdout + done.stderr
