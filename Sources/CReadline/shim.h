// GNU readline and its history, as the REPL uses them. Readline's settings are global variables; Swift 6 refuses
// to touch mutable C globals directly, so they are read and set through these functions, on the one queue that
// drives readline.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <readline/readline.h>
#include <readline/history.h>

static inline int docstore_rl_end(void) { return rl_end; }
static inline const char *docstore_rl_line_buffer(void) { return rl_line_buffer; }
static inline void docstore_rl_set_completion_over(int over) { rl_attempted_completion_over = over; }
/// What readline adds after a completed word (a space unless told otherwise; 0 adds nothing). Reset before each
/// completion.
static inline void docstore_rl_set_completion_append(int c) { rl_completion_append_character = c; }

/// Readline's settings for the shell: no signal handlers of its own, a name for ~/.inputrc, completion.
static inline void docstore_rl_configure(rl_completion_func_t *complete, const char *wordBreaks) {
    rl_catch_signals = 0;
    rl_readline_name = "docstore";
    rl_attempted_completion_function = complete;
    rl_completer_word_break_characters = strdup(wordBreaks);
}
