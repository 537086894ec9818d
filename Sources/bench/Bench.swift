import Foundation

@main
enum Bench {
    static func main() async {
        #if DEBUG
        print("bench: refusing to report from a debug build; run: swift run -c release bench")
        exit(1)
        #else
        let arguments = Array(CommandLine.arguments.dropFirst())
        await Task.detached { await BenchCommand.run(arguments) }.value
        #endif
    }
}
