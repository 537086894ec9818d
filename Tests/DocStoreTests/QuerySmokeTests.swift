import Foundation
import Testing
@testable import DocStore

@Suite struct QuerySmokeTests {
    @Test func basicQueriesRun() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = (0..<200).map { i in
            Person(name: "P\(i % 17)", age: i % 50, city: ["Oslo", "Bergen", "Tromsø"][i % 3],
                   email: i % 4 == 0 ? nil : "p\(i)@x", tags: i % 5 == 0 ? ["swift"] : ["lmdb", "c"])
        }
        try await store.insert(contentsOf: people)
        let adults = Person.include(#Predicate { $0.age >= 18 }).exclude(#Predicate { $0.city == "Oslo" })
            .sortBy(\.age).sortBy(\.name, order: .reverse)
        let expected = people.filter { $0.age >= 18 && $0.city != "Oslo" }
            .sorted { ($0.age, $1.name) < ($1.age, $0.name) }
        let got = try await adults.results(in: store)
        #expect(got.map(\.age) == expected.map(\.age))
        #expect(got.map(\.name) == expected.map(\.name))
        print(try await adults[0..<10].explain(in: store))
        let swift = try await Person.include(#Predicate { $0.tags.contains("swift") }).count(in: store)
        #expect(swift == 40)
        print(try await Person.include(#Predicate { $0.tags.contains("swift") }).explain(in: store))
        let page = try await Person.sortBy(\.age)[10..<15].results(in: store)
        #expect(page.count == 5)
        let oldest = try await Person.sortBy(\.age).reverse().first(in: store)
        #expect(oldest?.age == 49)
        let jill = try await Person.include(#Predicate { $0.name == "Jill" }).findOrCreate(in: store) {
            Person(name: "Jill", age: 30, city: "Bergen")
        }
        let again = try await Person.include(#Predicate { $0.name == "Jill" }).findOrCreate(in: store) {
            Person(name: "Jill", age: 31, city: "Bergen")
        }
        #expect(jill.id == again.id)
        let removed = try await Person.include(#Predicate { $0.age < 13 }).delete(in: store)
        #expect(removed == people.filter { $0.age < 13 }.count)
        print(try await Person.include(#Predicate { $0.city == "Bergen" && $0.age > 40 }).sortBy(\.age)[0..<3].explain(in: store))
        print(try await Person.include(#Predicate { $0.email == "p5@x" || $0.tags.contains("swift") }).explain(in: store))
        #expect(try await store.verify().isClean)
    }
}
